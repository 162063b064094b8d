"""What a subscriber receives. A module of its own, light on purpose.

Layer: datalog (API). Imports the standard library only, so that
`server.client` (which hands its users the same `Change`) loads no engine.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, repr=False)
class Change:
    """What a subscriber receives: rows with their diffs (+1 in, -1 out) at an epoch;
    `columns` names the rows' values: the query's answer variables."""

    rows: list[tuple[Any, ...]]
    diffs: list[int]
    epoch: int
    snapshot: bool = False
    columns: tuple[str, ...] = ()

    def __iter__(self) -> Iterator[Any]:
        return iter((self.rows, self.diffs, self.epoch))

    def __repr__(self) -> str:
        """Short, whatever the size: `<Change epoch 4: +1 -1 [(5,) +1, (3,) -1]>`."""
        kind = "Change snapshot" if self.snapshot else "Change"
        ins = sum(1 for d in self.diffs if d > 0)
        first = zip(self.rows[:3], self.diffs[:3], strict=False)  # a repr never raises
        shown = ", ".join(f"{_short(row)} {diff:+d}" for row, diff in first)
        more = f", ... {len(self.rows) - 3} more" if len(self.rows) > 3 else ""
        return f"<{kind} epoch {self.epoch}: +{ins} -{len(self.diffs) - ins} [{shown}{more}]>"

    def to_arrow(self, columns: Sequence[str] | None = None) -> Any:
        """The rows as a `pyarrow.Table` with a `diff` column; its other columns are
        named `columns`, or the query's variables (`self.columns`), or c0, c1, ...
        when neither is known."""
        import pyarrow as pa

        given = columns if columns is not None else self.columns or None
        width = len(self.rows[0]) if self.rows else len(given or ())
        names = list(given) if given is not None else [f"c{i}" for i in range(width)]
        if self.rows and len(names) != width:
            raise ValueError(f"{len(names)} column names for rows of {width} values")
        data = {name: [row[i] for row in self.rows] for i, name in enumerate(names)}
        return pa.table({**data, "diff": pa.array(self.diffs, pa.int64())})


Callback = Callable[[Change], None]


def _short(row: object, width: int = 60) -> str:
    text = repr(row)
    return text if len(text) <= width else text[: width - 4] + "...)"


@dataclass(frozen=True)
class Answer:
    """One query's answer as `Database.query_many` reads it: numpy columns by answer
    variable (symbols as strings) and the number of rows (a query without variables
    has no columns: one row, `()`, if its fact holds, else none)."""

    columns: dict[str, Any]
    size: int

    def rows(self) -> list[tuple[Any, ...]]:
        """The rows as Python tuples, as `Database.query` gives them."""
        values = [column.tolist() for column in self.columns.values()]
        return list(zip(*values, strict=True)) if values else [()] * self.size
