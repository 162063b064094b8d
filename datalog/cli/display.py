"""Answers, changes and statistics as terminal lines: what `repl` and `demo` print.

Layer: datalog.cli. Imports the public API's types, the fact-file value format of
`datalog.io.sources.csv` and, for query columns, the checker; the heavy ones inside
functions. `commands`, `repl` and `demo` all print through it, so none of them
imports another for its helpers.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from datalog import Change, Database


def literal(value: object) -> str:
    """A value as Datalog source writes it: strings quoted, floats without `.0`."""
    from datalog.io.sources.csv import format_value

    if isinstance(value, str):
        escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
        return f'"{escaped.replace(chr(9), chr(92) + "t")}"'
    return format_value(value)


def format_row(row: Sequence[object]) -> str:
    return "(" + ", ".join(map(literal, row)) + ")"


def answer_columns(db: Database, query: str) -> tuple[str, ...]:
    """The free variables of `query`, in the order its answer rows give them."""
    from datalog.lang.checks import check_query
    from datalog.lang.parser import parse_query

    return tuple(check_query(parse_query(query), db.checked.schema).answer_vars)


def format_answer(columns: Sequence[str], rows: Sequence[tuple[Any, ...]]) -> list[str]:
    """Rows Prolog-style (`x = 1, y = "a"`), sorted, then a count; `true`/`false` if closed."""
    if not columns:
        return ["true" if rows else "false"]
    lines = [", ".join(f"{c} = {literal(v)}" for c, v in zip(columns, row, strict=True))
             for row in sorted(rows)]  # fmt: skip
    return [*lines, f"({len(rows)} row{'' if len(rows) == 1 else 's'})"]


def change_lines(change: Change) -> list[str]:
    """`+ row` / `- row` lines for one delivered change, insertions after retractions."""
    pairs = sorted(zip(change.diffs, change.rows, strict=True), key=lambda p: (p[0] > 0, p[1]))
    return [f"{'+' if d > 0 else '-'} {format_row(r)}" + (f" x{abs(d)}" if abs(d) > 1 else "")
            for d, r in pairs]  # fmt: skip


def stats_summary(stats: dict[str, Any]) -> list[str]:
    """A few readable lines from `Database.stats()`."""
    from datalog.lang.system import is_reserved

    inputs: dict[str, Any] = stats.get("inputs", {})
    lines = [f"epoch {stats.get('epoch')}"]
    views: dict[str, Any] = stats.get("views", {})
    for name, info in inputs.items():
        if name.startswith("__") or is_reserved(name) or name in views:
            continue
        arrangements = info.get("arrangements", {})
        lines.append(
            f"stored facts of {name}: {info.get('tuples', 0)} facts "
            f"({info.get('updates', 0)} updates), {len(arrangements)} shared arrangement(s)"
        )
    for name, view in views.items():
        lines.append(
            f"shared view {name}: {view.get('tuples', 0)} tuples, "
            f"read by {view.get('readers', 0)} dataflow(s)"
        )
    for flow in stats.get("dataflows", []):
        lines.append(
            f"dataflow {flow.get('name')}: {flow.get('operators')} operators, "
            f"{len(flow.get('arrangements', []))} private arrangement(s)"
        )
    for query, info in stats.get("queries", {}).items():
        lines.append(
            f"live query {query}: {info.get('subscribers')} subscriber(s), "
            f"{info.get('answer_tuples')} answer tuples"
        )
        last = info.get("last_commit")
        if last:  # how the last big commit reached it (docs/adr/0053, 0064)
            how = "recomputed from the new base" if last["recomputed"] else "ran the change"
            lines.append(
                f"  last big commit, epoch {last['epoch']}: {how} "
                f"({last['change_rows']:,} rows changed, base {last['base_rows']:,} rows): "
                f"{last.get('reason', '')}"
            )
    return lines
