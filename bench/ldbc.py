"""Read LDBC SNB CSV directories into binary-attribute relations.

Layer: bench — may import anything public from deltalog packages and peers.
The LDBC SNB Interactive CSV layout holds `static/` and `dynamic/` directories of
`|`-separated files with a header line: entity files `<entity>_0_0.csv` whose
first column is `id`, and edge files `<a>_<rel>_<b>_0_0.csv` (two ids, maybe more
columns such as `creationDate`). `to_relations` maps them to relations:

- an entity file gives `<entity>(id)` and one binary attribute per other column,
  `person.firstName(id, value)`;
- an edge file gives one relation named by its stem, `person_knows_person(c0, c1, c2)`.

Every relation is a pyarrow table with columns `c0..ck`: int64 where every value of
the column parses as an integer (ids, epoch-millisecond dates), strings otherwise.
`declarations` and `load_database` put them into a Deltalog `Database`; peers load
the same tables (see `bench.peers`).
"""

from __future__ import annotations

import re
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
from pyarrow import csv

from datalog.db.database import Database

__all__ = ["Relations", "declarations", "load", "load_database", "read_raw", "to_relations"]

Relations = dict[str, pa.Table]
_FILE = re.compile(r"^(?P<stem>.+?)(_\d+_\d+)?\.csv$")


def read_raw(root: str | Path) -> dict[str, pa.Table]:
    """Every CSV file under `root/static` and `root/dynamic` (or `root` itself), by stem,
    with the header's column names; every column is read as a string."""
    root = Path(root)
    folders = [f for f in (root / "static", root / "dynamic") if f.is_dir()] or [root]
    tables: dict[str, pa.Table] = {}
    for folder in folders:
        for path in sorted(folder.glob("*.csv")):
            match = _FILE.match(path.name)
            if match is not None:
                tables[match["stem"]] = _read_csv(path)
    if not tables:
        raise FileNotFoundError(f"no LDBC CSV files under {root}")
    return tables


def _read_csv(path: Path) -> pa.Table:
    with path.open(encoding="utf-8") as lines:
        header = lines.readline().rstrip("\r\n").split("|")
    names = [f"c{i}" for i in range(len(header))]
    table = csv.read_csv(
        path,
        read_options=csv.ReadOptions(skip_rows=1, column_names=names),
        parse_options=csv.ParseOptions(delimiter="|", quote_char=False),
        convert_options=csv.ConvertOptions(
            column_types=dict.fromkeys(names, pa.string()), strings_can_be_null=False
        ),
    )
    return table.rename_columns(header)


def to_relations(raw: dict[str, pa.Table]) -> Relations:
    """Binary attributes for entity tables, one relation per edge table (see the module)."""
    relations: Relations = {}
    for stem, table in raw.items():
        columns = [_typed(table.column(i)) for i in range(table.num_columns)]
        if table.column_names[0] == "id":
            ids = columns[0]
            relations[stem] = pa.table({"c0": ids})
            for name, values in zip(table.column_names[1:], columns[1:], strict=True):
                relations[f"{stem}.{name}"] = pa.table({"c0": ids, "c1": values})
        else:
            relations[stem] = pa.table({f"c{i}": col for i, col in enumerate(columns)})
    return relations


def _typed(column: pa.ChunkedArray) -> pa.ChunkedArray:
    """The column as int64 if every value is an integer, else unchanged."""
    if pa.types.is_integer(column.type):
        return column.cast(pa.int64())
    if pa.types.is_string(column.type) and len(column) > 0:
        valid = pc.all(pc.match_substring_regex(column, r"^-?\d{1,18}$")).as_py()
        if valid:
            return column.cast(pa.int64())
    return column


def load(root: str | Path) -> Relations:
    """`to_relations(read_raw(root))`."""
    return to_relations(read_raw(root))


def declarations(relations: Relations) -> str:
    """Datalog `.decl` lines for `relations` (int64 as `number`, others as `symbol`)."""
    lines = []
    for name, table in relations.items():
        cols = ", ".join(
            f"{col}: {'number' if pa.types.is_integer(field.type) else 'symbol'}"
            for col, field in zip(table.column_names, table.schema, strict=True)
        )
        lines.append(f".decl {name}({cols})")
    return "\n".join(lines) + "\n"


def load_database(db: Database, relations: Relations) -> None:
    """Declare `relations` in `db` and insert all their rows in one transaction."""
    db.define(declarations(relations))
    with db.transaction() as tx:
        for name, table in relations.items():
            tx.insert(name, table)
