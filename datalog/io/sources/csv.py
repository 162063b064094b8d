"""Soufflé-compatible fact files: `.input` directives read them, `.output` write them.

Layer: datalog (sources). Imports the public API of `datalog`, and pyarrow when it
reads a file that `datalog.eval.facts_text` does not (ADR 0067).

Input. `.input r` reads `<facts_dir>/r.facts` (a missing file is an error, as in
Soufflé, unless the caller allows it: the relation then starts empty; ADR 0043):
one fact a line, columns split by
a tab, no header, no quoting (a symbol is everything between two delimiters),
empty lines skipped. Directive options: `filename="x.csv"` (relative to the
facts directory unless absolute), `delimiter=","`, `headers=true` (skip one
line); `IO=file` is the only input kind and is ignored. Columns are typed by
the declaration: number -> int64, unsigned -> uint64, float -> float64,
symbol -> string.

pyarrow parses the file (the fast path). If it rejects the file, the file is
scanned again in Python, which names the first bad line and column in a
`FactFileError` (so good files never pay for diagnostics); values the strict
scan accepts but pyarrow's parser does not (such as `+5`) are read by that
scan. Every file is parsed before anything is inserted, and all of them go in
as one transaction, inserted in chunks of `CHUNK_ROWS` rows with a progress
line for large files: a bad file loads nothing. `load_files` reads a file of at
most `Tuning.text_facts` bytes whose every line has a plain form without pyarrow
(`datalog.eval.facts_text`, the same columns; ADR 0067).

Output. `.output r` writes `<output_dir>/r.csv`, tab-separated, rows sorted
(numbers numerically, symbols lexicographically, column by column; formatted by
whole columns, `datalog.io.sources.text`); options
`filename=`, `delimiter=`, `headers=true` (a first line of column names) and
`IO=stdout`. An output directory of `-` prints every output relation to
stdout in Soufflé's framing (a `---------------` line, the name, a
`===============` line, the rows, a closing `===============` line).
"""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from datalog.db.change import Answer
from datalog.eval.facts_text import Columns, read_plain
from datalog.lang.ast import NOWHERE, ColumnType, Directive, Span
from datalog.lang.errors import DatalogError
from datalog.lang.schema import RelationInfo

if TYPE_CHECKING:
    import pyarrow as pa

    from datalog.db.database import Database

CHUNK_ROWS = 1_000_000  # rows per `Transaction.insert`
PROGRESS_ROWS = 1_000_000  # files with more rows than this show progress


def arrow_type(kind: ColumnType) -> pa.DataType:
    """The Arrow type a column of `kind` is read as (pyarrow is loaded here: a program
    of small fact files never needs it, ADR 0067)."""
    import pyarrow as pa

    return {"number": pa.int64(), "unsigned": pa.uint64(), "float": pa.float64()}.get(
        kind, pa.string()
    )


_INTEGER = re.compile(r"[+-]?[0-9]+\Z")
_NATURAL = re.compile(r"\+?[0-9]+\Z")
_BOUNDS = {"number": (-(2**63), 2**63 - 1), "unsigned": (0, 2**64 - 1)}

_log = logging.getLogger("deltalog")


class FactFileError(DatalogError):
    """A fact file that cannot be read: missing, badly shaped, or a bad value.

    `path`, `line` (1-based, physical) and `column` (1-based field number) say
    where; `text` is the offending line, shown with a caret under the field.
    """

    def __init__(
        self, message: str, path: str | Path, line: int = 0, column: int = 0, text: str = ""
    ) -> None:
        self.path = str(path)
        self.text = text
        self.caret_at = 0  # character offset of the bad field in `text`
        span = Span(line, column, line, column) if line else NOWHERE
        super().__init__(message, span)

    def format(self) -> str:
        where = self.path if self.line <= 0 else f"{self.path}, line {self.line}"
        if self.column > 0:
            where += f", column {self.column}"
        text = f"error: {self.message}\n  in {where}"
        if self.text:
            pad = "".join(c if c == "\t" else " " for c in self.text[: self.caret_at])
            text += f"\n    {self.text}\n    {pad}^"
        return text


@dataclass(frozen=True)
class FactFile:
    """Where and how one relation's facts are stored."""

    relation: RelationInfo
    path: Path
    delimiter: str = "\t"
    headers: bool = False


# --- locating files -----------------------------------------------------------------


def input_file(directive: Directive, info: RelationInfo, facts_dir: str | Path) -> FactFile:
    """The file an `.input` directive reads, with its delimiter and header flag."""
    return _file(directive, info, facts_dir, f"{directive.relation}.facts")


def output_file(directive: Directive, info: RelationInfo, output_dir: str | Path) -> FactFile:
    """The file an `.output` directive writes, with its delimiter and header flag."""
    return _file(directive, info, output_dir, f"{directive.relation}.csv")


def _file(directive: Directive, info: RelationInfo, folder: str | Path, default: str) -> FactFile:
    name = directive.option("filename", default) or default
    path = Path(name) if Path(name).is_absolute() else Path(folder) / name
    delimiter = directive.option("delimiter", "\t") or "\t"
    headers = (directive.option("headers", "false") or "").lower() == "true"
    return FactFile(info, path, delimiter, headers)


# --- reading --------------------------------------------------------------------------


def read_facts(file: FactFile, allow_missing: bool = False) -> pa.Table:
    """The facts of `file` as a typed table; `FactFileError` if any line is bad, or
    if the file does not exist (as in Soufflé) unless `allow_missing`: then the
    relation starts empty, with a warning."""
    if not file.path.exists():
        if not allow_missing:
            raise missing_file(file)
        _log.warning("no fact file %s: `%s` starts empty", file.path, file.relation.name)
        return _empty(file.relation)
    if not file.path.is_file():
        raise FactFileError(f"cannot open fact file for `{file.relation.name}`", file.path)
    if file.relation.arity == 0 or len(file.delimiter) != 1:
        return _read_strictly(file)
    import pyarrow as pa

    try:
        return _read_arrow(file)
    except (pa.ArrowInvalid, UnicodeDecodeError):
        return _read_strictly(file)  # names the first bad line, or reads what arrow could not


def read_columns(file: FactFile, allow_missing: bool = False) -> pa.Table | Columns:
    """`read_facts`, but a small file (`Tuning.text_facts` bytes at most) as numpy
    columns read without pyarrow when its text allows (`facts_text.read_plain`; ADR 0067)."""
    if file.relation.arity and len(file.delimiter) == 1 and file.path.is_file():
        found = read_plain(file.relation, file.path, file.delimiter, file.headers)
        if found is not None:
            return found
    return read_facts(file, allow_missing)


def missing_file(file: FactFile, note: str = "") -> FactFileError:
    """The error for an `.input` file that does not exist (`note` appended)."""
    name = file.relation.name
    message = (
        f"no fact file for `.input {name}`: create it, or let `{name}` start empty "
        "(`deltalog run --allow-missing-inputs`, `load_inputs(..., allow_missing=True)`)"
    )
    return FactFileError(message + note, file.path)


def _empty(info: RelationInfo) -> pa.Table:
    import pyarrow as pa

    if info.arity == 0:
        return pa.table({"present": pa.array([], pa.bool_())})
    arrays = [pa.array([], arrow_type(t)) for t in info.types]
    return pa.table(arrays, names=list(info.column_names))


def _read_arrow(file: FactFile) -> pa.Table:
    import pyarrow as pa
    import pyarrow.csv as pacsv

    names = list(file.relation.column_names)  # the declaration's: rows match them by name
    types = [arrow_type(t) for t in file.relation.types]
    return pacsv.read_csv(
        file.path,
        read_options=pacsv.ReadOptions(column_names=names, skip_rows=int(file.headers)),
        parse_options=pacsv.ParseOptions(
            delimiter=file.delimiter, quote_char=False, double_quote=False, escape_char=False
        ),
        convert_options=pacsv.ConvertOptions(
            column_types=dict(zip(names, types, strict=True)),
            null_values=[],
            strings_can_be_null=False,
            quoted_strings_can_be_null=False,
        ),
        # The C library's malloc, not pyarrow's default (mimalloc), which keeps the
        # pages of a parsed file after its columns are inserted and freed: 13-19 MiB
        # more peak for a 1M-edge file, the same speed (ADR 0062).
        memory_pool=pa.system_memory_pool(),
    )


def _read_strictly(file: FactFile) -> pa.Table:
    """Parse `file` line by line in Python, raising at the first bad line."""
    info = file.relation
    columns: list[list[Any]] = [[] for _ in info.types]
    rows = 0
    # Bytes that are not UTF-8 become U+FFFD, as a lenient reader of Soufflé's byte
    # strings can (every symbol must be text to be logged and served).
    with file.path.open(encoding="utf-8", errors="replace", newline="") as stream:
        for number, raw in enumerate(stream, 1):
            line = raw.rstrip("\r\n")
            if (file.headers and number == 1) or not line:
                continue
            for column, value in zip(columns, _fields(file, number, line), strict=True):
                column.append(value)
            rows += 1
    import pyarrow as pa

    if info.arity == 0:
        return pa.table({"present": pa.array([True] * min(rows, 1))})
    arrays = [pa.array(c, arrow_type(t)) for c, t in zip(columns, info.types, strict=True)]
    return pa.table(arrays, names=list(info.column_names))


def _fields(file: FactFile, number: int, line: str) -> list[Any]:
    """The typed values of one line, or a `FactFileError` pointing at the bad one."""
    info = file.relation
    texts = line.split(file.delimiter) if info.arity else []
    if len(texts) != info.arity:
        raise FactFileError(
            f"`{info.name}` has {info.arity} columns, but this line has {len(texts)}",
            file.path,
            number,
            0,
            line,
        )
    values = []
    for i, (text, kind) in enumerate(zip(texts, info.types, strict=True)):
        value, problem = _value(text, kind)
        if problem:
            error = FactFileError(
                f"{problem} in column `{info.column_names[i]}` of `{info.name}` ({kind})",
                file.path,
                number,
                i + 1,
                line,
            )
            error.caret_at = sum(len(t) + len(file.delimiter) for t in texts[:i])
            raise error
        values.append(value)
    return values


def _value(text: str, kind: ColumnType) -> tuple[Any, str]:
    """`(value, "")`, or `(None, problem)` when `text` is not a `kind`."""
    if kind == "symbol":
        return text, ""
    if kind == "float":
        try:  # Python's float() also reads `1_000`, which Soufflé (and pyarrow) refuse
            if "_" in text:
                raise ValueError(text)
            return float(text), ""
        except ValueError:
            return None, f"`{text}` is not a float"
    pattern = _INTEGER if kind == "number" else _NATURAL
    if not pattern.match(text):
        return None, f"`{text}` is not {'a number' if kind == 'number' else 'an unsigned'}"
    low, high = _BOUNDS[kind]
    if not low <= int(text) <= high:
        return None, f"`{text}` is out of range for {kind}"
    return int(text), ""


# --- loading ----------------------------------------------------------------------------


def input_files(db: Database, facts_dir: str | Path = ".") -> list[FactFile]:
    """The files the program's `.input` directives read, in directive order."""
    schema = db.checked.schema
    return [
        input_file(d, schema.require(d.relation, d.span), facts_dir)
        for d in db.checked.directives
        if d.kind == "input"
    ]


def load_inputs(
    db: Database,
    facts_dir: str | Path = ".",
    *,
    progress: bool | None = None,
    allow_missing: bool = False,
) -> dict[str, int]:
    """Read every `.input` file, then insert them all as one transaction.

    Returns the number of lines read per relation. Nothing is inserted unless
    every file parses. A file that does not exist is a `FactFileError`, as in
    Soufflé, unless `allow_missing` (its relation then starts empty, with a
    warning). `progress=None` shows progress only when stderr is a TTY.
    """
    files = input_files(db, facts_dir)
    return load_files(db, files, progress=progress, allow_missing=allow_missing)


def load_files(
    db: Database,
    files: Sequence[FactFile],
    *,
    progress: bool | None = None,
    allow_missing: bool = False,
) -> dict[str, int]:
    """Read `files` (all of them, checking every line), then insert them in one transaction."""
    tables = [(f, read_columns(f, allow_missing)) for f in files]
    show = sys.stderr.isatty() if progress is None else progress
    counts: dict[str, int] = {}
    with db.transaction() as tx:
        for file, table in tables:
            name = file.relation.name
            report = _progress(name, _rows(table)) if show else _silent
            _insert_chunks(tx.insert, name, file.relation, table, report)
            counts[name] = counts.get(name, 0) + _rows(table)
    return counts


def _insert_chunks(
    insert: Callable[[str, object], None],
    name: str,
    info: RelationInfo,
    table: pa.Table | Columns,
    report: Callable[[int], None],
) -> None:
    rows = _rows(table)
    if info.arity == 0:
        insert(name, [()] if rows else [])
        return
    for start in range(0, rows, CHUNK_ROWS):
        if isinstance(table, dict):
            insert(name, {k: column[start : start + CHUNK_ROWS] for k, column in table.items()})
        else:
            insert(name, table.slice(start, CHUNK_ROWS))
        report(min(start + CHUNK_ROWS, rows))


def _rows(table: pa.Table | Columns) -> int:
    if isinstance(table, dict):
        return len(next(iter(table.values())))
    return int(table.num_rows)


def _silent(done: int) -> None:
    pass


def _progress(name: str, total: int) -> Callable[[int], None]:
    """A `\\r`-updated counter on stderr, for files over `PROGRESS_ROWS` rows."""
    if total <= PROGRESS_ROWS:
        return _silent

    def report(done: int) -> None:
        end = "\n" if done >= total else ""
        print(f"\rloading {name}: {done:,} / {total:,} rows", end=end, file=sys.stderr, flush=True)

    return report


# --- writing ----------------------------------------------------------------------------


def read_outputs(
    db: Database, kinds: Collection[str] = ("output", "printsize")
) -> dict[str, Answer]:
    """The relations the program's `.output` and `.printsize` directives (or those of
    `kinds`) name, by name, read in one evaluation (`Database.query_many`): a
    recursive group computed once for all its printed relations (ADR 0061)."""
    names = list(dict.fromkeys(d.relation for d in db.checked.directives if d.kind in kinds))
    texts = []
    for name in names:
        arity = db.checked.schema.require(name).arity
        texts.append(f"{name}({', '.join(f'x{i}' for i in range(arity))})")
    return dict(zip(names, db.query_many(texts), strict=True)) if names else {}


def format_value(value: object) -> str:
    """A value as Soufflé writes it: floats without a trailing `.0`."""
    if isinstance(value, float):
        text = repr(value)
        return text[:-2] if text.endswith(".0") else text
    return str(value)


Rows = Iterable[tuple[Any, ...]] | Answer  # tuples in the order given, or an answer
# From this many rows an answer is written by whole columns (`sorted_text`). Below,
# its rows sorted as tuples cost less than loading pyarrow.compute and the pandas
# that pyarrow's conversions import when it is installed (0.1-0.4 s a process).
COLUMNS_FROM = 100_000


def write_rows(stream: IO[str], rows: Rows, delimiter: str = "\t") -> None:
    """Rows as delimited text lines: an `Answer` sorted and formatted by whole
    columns (`sorted_text`), tuples one at a time in their order (so a lazy iterable
    stays lazy); a small answer as its tuples, sorted (`COLUMNS_FROM`)."""
    if isinstance(rows, Answer) and rows.size < COLUMNS_FROM:
        rows = sorted(rows.rows())
    if isinstance(rows, Answer):
        from datalog.io.sources.text import sorted_text  # pyarrow.compute: 30 ms to load

        for text in sorted_text(list(rows.columns.values()), rows.size, delimiter):
            stream.write(text)
        return
    for row in rows:  # a nullary relation that holds is written `()`, as Soufflé does
        stream.write((delimiter.join(map(format_value, row)) if row else "()") + "\n")


def write_outputs(
    db: Database,
    output_dir: str | Path = ".",
    stdout: IO[str] | None = None,
    answers: Mapping[str, Answer] | None = None,
) -> list[Path]:
    """Write every `.output` relation; `output_dir="-"` prints them to `stdout`.
    `answers` holds the relations already read (`read_outputs`), else they are read.

    Returns the files written.
    """
    stdout = stdout or sys.stdout
    if answers is None:
        answers = read_outputs(db, ("output",))
    written = []
    for directive in db.checked.directives:
        if directive.kind != "output":
            continue
        info = db.checked.schema.require(directive.relation, directive.span)
        file = output_file(directive, info, output_dir)
        rows = answers[directive.relation]  # written sorted
        if str(output_dir) == "-" or (directive.option("IO") or "").lower() == "stdout":
            print_framed(stdout, file, rows)
        else:
            write_file(file, rows)
            written.append(file.path)
    return written


def write_file(file: FactFile, rows: Rows) -> None:
    """A relation's rows into its output file (with a header line if asked)."""
    file.path.parent.mkdir(parents=True, exist_ok=True)
    with file.path.open("w", encoding="utf-8", newline="\n") as stream:
        if file.headers:
            stream.write(file.delimiter.join(file.relation.column_names) + "\n")
        write_rows(stream, rows, file.delimiter)


def print_framed(stream: IO[str], file: FactFile, rows: Rows) -> None:
    """A relation in Soufflé's framing for `-D -`."""
    stream.write(f"---------------\n{file.relation.name}\n")
    if file.headers:
        stream.write(file.delimiter.join(file.relation.column_names) + "\n")
    stream.write("===============\n")
    write_rows(stream, rows, file.delimiter)
    stream.write("===============\n")
