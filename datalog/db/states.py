"""The state of relations as explanations read it: each relation's tuples at one epoch,
looked up by the values of some columns without turning the relation into Python.

Layer: datalog (API). Imports the language's types, `datalog.eval.rows`, `datalog.lang.pretty`
and numpy; the database hands it how to read a relation (`Reading`), so it knows
nothing of live queries or history.

`why_not` (docs/adr/0045) asks, literal by literal, which tuples of a relation agree
with a partial binding. A relation is read once per explanation, as the engine
computes it (a base relation's stored tuples; a derived relation's one-shot answer,
which magic sets restrict to the asked tuple's invariant columns), and kept as numpy
columns. A lookup on some columns sorts the relation by them once (`np.lexsort`)
and then narrows a range with `searchsorted`, column by column, so only the tuples
found become Python rows. Found rows come back in the value order of
`datalog.db.pacing.sort_key` (numbers before symbols, numbers by value, symbols by their
strings), which does not depend on how symbols were interned.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from datalog.db.pacing import sort_key
from datalog.eval.functors import FunctorBinding
from datalog.eval.reference import Row
from datalog.eval.rows import to_rows
from datalog.eval.symbols import SymbolTable
from datalog.lang.ast import ColumnType, Const
from datalog.lang.checks import CheckedProgram
from datalog.lang.functions import Value
from datalog.lang.pretty import format_term
from differential.batch import Updates
from differential.budget import check_rows
from differential.inputs import Requests
from differential.trace.batch import key_hash

Array = npt.NDArray[Any]
Positions = tuple[int, ...]

__all__ = ["Follows", "Looked", "Reading", "States", "Stored", "unchanged"]


@dataclass(frozen=True)
class Reading:
    """How to read relations at one epoch: the program then in force, a query's
    consolidated answer (`answer("r(x0, 1)")`: columns in the order of the query's
    variables) and a relation's stored tuples with their counts (`stored`; None
    when it has no input)."""

    epoch: int
    checked: CheckedProgram
    answer: Callable[[str], Updates]
    stored: Callable[[str], Updates | None]
    symbols: SymbolTable


@dataclass(eq=False)
class Stored:
    """One relation's tuples: `columns` hold the columns not in `fixed`, whose value
    every tuple has (the columns a demand bound)."""

    types: tuple[ColumnType, ...]
    columns: tuple[Array, ...]
    size: int
    symbols: SymbolTable
    fixed: Mapping[int, Value] = field(default_factory=dict)
    _orders: dict[Positions, tuple[Array, list[Array]]] = field(default_factory=dict)
    _found: dict[tuple[Positions, Row], list[Row]] = field(default_factory=dict)

    @property
    def free(self) -> list[int]:
        return [i for i in range(len(self.types)) if i not in self.fixed]

    def lookup(self, positions: Positions, key: Sequence[Value]) -> list[Row]:
        """The tuples whose columns `positions` hold `key`, in value order."""
        cache = (positions, tuple(key))
        found = self._found.get(cache)
        if found is None:
            found = self._found[cache] = self._lookup(positions, key)
        return found

    def looked(self) -> list[tuple[tuple[Positions, Row], list[Row]]]:
        """Every lookup made so far, `((positions, key), rows found)`."""
        return list(self._found.items())

    def touched_by(self, columns: Sequence[Array], entity: bool = False) -> bool:
        """Whether a row of `columns` (every column of the relation, encoded as stored:
        an epoch's requests) agrees with a lookup made so far on the columns it looked
        up (its values encoded now: a symbol interned since counts). Writing no such
        row leaves every lookup's answer as it was. Hashes compared: a collision says
        touched, never the reverse. `entity`: a last-write-wins relation, where a row
        written retracts the entity's old value unasked, so rows agree by their first
        column alone (any row touches a lookup that does not bind it)."""
        if not self._found or not columns or not len(columns[0]):
            return False
        keys: dict[Positions, list[Row]] = {}
        for positions, key in self._found:
            if entity:  # the first column's value alone, or none bound
                at = positions.index(0) if 0 in positions else None
                positions, key = ((0,), (key[at],)) if at is not None else ((), ())
            keys.setdefault(positions, []).append(key)
        for positions, group in keys.items():
            if not positions:  # the whole relation was read
                return True
            encoded = [[self._encode(v, self.types[p]) for p, v in zip(positions, key, strict=True)]
                       for key in group]  # fmt: skip
            wanted = [values for values in encoded if all(v is not None for v in values)]
            if not wanted:
                continue
            asked = [columns[p] for p in positions]
            values = zip(*wanted, strict=True)
            held = [np.array(v, dtype=a.dtype) for a, v in zip(asked, values, strict=True)]
            if np.isin(key_hash(asked), key_hash(held)).any():
                return True
        return False

    def _lookup(self, positions: Positions, key: Sequence[Value]) -> list[Row]:
        free = self.free
        bound: list[tuple[int, Any]] = []  # (index into `columns`, encoded value)
        for position, value in zip(positions, key, strict=True):
            if position in self.fixed:
                if self.fixed[position] != value:
                    return []
                continue
            encoded = self._encode(value, self.types[position])
            if encoded is None:
                return []
            bound.append((free.index(position), encoded))
        selected = self._select(bound) if bound else np.arange(self.size)
        check_rows(len(selected), "an explanation's lookup")  # --max-rows: before decoding
        columns = [column[selected] for column in self.columns]
        kinds = [self.types[i] for i in free]
        rows = to_rows(columns, kinds, self.symbols, len(selected))
        if self.fixed:
            rows = [self._whole(row, free) for row in rows]
        return sorted(rows, key=sort_key)

    def _select(self, bound: list[tuple[int, Any]]) -> Array:
        """Indexes of the tuples with the `bound` values: a sorted order on those
        columns (kept for later lookups), narrowed column by column."""
        indexes = tuple(index for index, _ in bound)
        order = self._orders.get(indexes)
        if order is None:
            keys = [self.columns[i] for i in indexes]
            permutation = np.lexsort(keys[::-1]) if keys else np.arange(self.size)
            order = self._orders[indexes] = (permutation, [k[permutation] for k in keys])
        permutation, ordered = order
        low, high = 0, self.size
        for column, (_, value) in zip(ordered, bound, strict=True):
            part = column[low:high]
            low, high = (
                low + int(np.searchsorted(part, value, "left")),
                low + int(np.searchsorted(part, value, "right")),
            )
            if low >= high:
                return permutation[:0]
        return permutation[low:high]

    def encoded(self, position: int) -> Any:
        """The value the demand bound column `position` to, as the column stores it
        (None: no tuple can hold it)."""
        return self._encode(self.fixed[position], self.types[position])

    def _encode(self, value: Value, kind: ColumnType) -> Any:
        """`value` as the column stores it (None: no tuple can hold it)."""
        if kind == "symbol":
            return self.symbols.get(value) if isinstance(value, str) else None
        if isinstance(value, str):
            return None
        if kind == "float":
            return np.float64(value)
        if kind == "unsigned":
            return np.uint64(value) if 0 <= int(value) < 2**64 else None
        return np.int64(value) if -(2**63) <= int(value) < 2**63 else None

    def _whole(self, row: Row, free: list[int]) -> Row:
        values: list[Value] = [0] * len(self.types)
        for position, value in self.fixed.items():
            values[position] = value
        for position, value in zip(free, row, strict=True):
            values[position] = value
        return tuple(values)


class States:
    """The relations of one explanation, each read when first needed (`Reading`).

    `demand` restricts one relation to the tuples with given values in given columns
    (the asked tuple's invariant columns, `datalog.eval.heights.invariant_columns`): the
    only ones its explanation can look at."""

    def __init__(self, reading: Reading, demand: tuple[str, Mapping[int, Value]] | None) -> None:
        self.reading, self.demand = reading, demand
        self.read: dict[str, Stored] = {}
        self.texts: dict[str, str] = {}  # the query each derived relation was read by
        schema = reading.checked.schema
        ruled = {rule.head.name for rule in reading.checked.rules}
        self.computed = ruled | set(reading.checked.dominances)  # not just their input
        self.schema = schema

    def __getitem__(self, relation: str) -> Stored:
        found = self.read.get(relation)
        if found is None:
            found = self.read[relation] = self._read(relation)
        return found

    def _read(self, relation: str) -> Stored:
        types = tuple(self.schema.types(relation))
        symbols = self.reading.symbols
        if relation not in self.computed:
            state = self.reading.stored(relation)
            if state is None:
                return Stored(types, tuple(np.zeros(0, np.int64) for _ in types), 0, symbols)
            present = np.flatnonzero(state.diffs > 0)
            columns = tuple(column[present] for column in state.columns[: len(types)])
            return Stored(types, columns, len(present), symbols)
        fixed = dict(self.demand[1]) if self.demand and self.demand[0] == relation else {}
        fixed = {i: v for i, v in fixed.items() if _writable(v)}
        args = [
            format_term(Const(fixed[i], kind)) if i in fixed else f"x{i}"
            for i, kind in enumerate(types)
        ]
        text = self.texts[relation] = f"{relation}({', '.join(args)})"
        answer = self.reading.answer(text)
        present = np.flatnonzero(answer.diffs > 0)
        columns = tuple(column[present] for column in answer.columns)
        return Stored(types, columns, len(present), symbols, fixed)


class Follows(Protocol):
    """The dataflows that keep the derived relations a watched why-not read, and the
    changes they collected (`datalog.db.follows.Follows`)."""

    def touched(self, states: States) -> bool | None: ...

    def drain(self) -> None: ...

    def before(self, requests: Mapping[str, Requests], reads: Iterable[str]) -> list[Any]: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class Looked:
    """What a why-not read (`States`: the relations and the lookups it made in them),
    the functor bindings it was explained with (`register_functor` rebinds one
    without an epoch: a why-not computed since may differ) and, for a watched one, the
    dataflows keeping the derived relations it read (`datalog.db.follows`)."""

    states: States
    functors: dict[str, FunctorBinding]
    follows: Follows | None = None


def unchanged(
    old: States,
    reading: Reading,
    requests: Mapping[str, Requests],
    follows: Follows | None = None,
) -> bool | None:
    """Whether every lookup an explanation made over `old` finds what it found then,
    after an epoch that wrote `requests` and changed no rules (docs/adr/0060): a base
    relation is checked against the rows asked of it; a derived one, with `follows`,
    against the rows of it that changed (docs/adr/0071; None if `follows` cannot tell),
    else it is read again at `reading` (the epoch after) and its lookups made again.
    An explanation reads relations only through `Stored.lookup`, so when this holds
    it would be the same."""
    schema = old.schema
    for relation, stored in old.read.items():
        written = requests.get(relation) if relation not in old.computed else None
        entity = relation in schema and schema[relation].semantics == "last_write_wins"
        if written is not None and stored.touched_by(written.columns, entity):
            return False
    if follows is not None:
        touched = follows.touched(old)
        return None if touched is None else not touched
    fresh = States(reading, old.demand)
    for relation, stored in old.read.items():
        if relation in old.computed:
            now = fresh[relation]
            if any(now.lookup(*asked) != rows for asked, rows in stored.looked()):
                return False
    return True


def _writable(value: Value) -> bool:
    """Whether a constant reads back as itself in a query (not NaN or an infinity)."""
    return not isinstance(value, float) or bool(np.isfinite(value))
