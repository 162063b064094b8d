"""Transactions: inserts, retractions and rule replacements, committed as one epoch.

Layer: datalog (API). Imports numpy, `datalog.eval.rows`, `datalog.db.definitions`,
`datalog.db.durable` (the record it logs) and `datalog.db.epochs` (the one commit path);
`datalog.db.database` creates them.

A transaction's rows are converted and validated as they are added, and each
`redefine` is checked (with the ones before it) when it is called; `commit` hands
all of it to `Epochs.commit` as one `Write`, which logs, applies, repairs on failure
and delivers. If it does not happen, the symbols only its rows interned are
forgotten again.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from datalog.db import definitions
from datalog.db.definitions import ProgramChange, ProgramState
from datalog.db.durable import commit_record
from datalog.db.epochs import Epochs, Write
from datalog.eval.expressions import DTYPES
from datalog.eval.rows import to_columns
from datalog.eval.symbols import SymbolTable
from datalog.lang.errors import TransactionError, UnknownNameError, did_you_mean
from datalog.lang.schema import Schema
from datalog.lang.system import UNIT, is_reserved, reserved_message
from datalog.storage.records import Record
from differential.inputs import Requests

Part = tuple[str, tuple[np.ndarray, ...], bool]  # relation, columns, inserting


class Transaction:
    """Inserts and retractions, validated as they are added, applied at commit."""

    def __init__(
        self,
        program: ProgramState,
        symbols: SymbolTable,
        epochs: Epochs,
        schema: Schema | None = None,
    ) -> None:
        self.program, self.symbols, self.epochs = program, symbols, epochs
        self.schema = schema  # what rows are checked against (None: the program's)
        self.parts: list[Part] = []
        self.redefinitions: list[tuple[str, str]] = []  # (relation, rules text)
        self.change: ProgramChange | None = None  # the program they make
        self.done = False
        self.interned: tuple[int, int] | None = None  # symbol ids only its rows added
        self.committing = False  # its commit began: `Epochs.commit` owns the undo

    def __repr__(self) -> str:
        rows = sum(len(columns[0]) for _, columns, _ in self.parts)
        state = "committed" if self.done else "open"
        return f"<Transaction ({state}): {len(self.parts)} changes, {rows} rows>"

    def insert(self, relation: str, rows: object) -> None:
        self.parts.append((relation, self._columns(relation, rows), True))

    def retract(self, relation: str, rows: object) -> None:
        self.parts.append((relation, self._columns(relation, rows), False))

    def redefine(self, relation: str, text: str) -> None:
        """Replace every rule of `relation` by the rules of `text` at this transaction's
        epoch (see `Database.redefine`); checked now, with earlier redefinitions."""
        self._check_open()
        self.change = definitions.redefined(
            self.change or definitions.unchanged(self.program), relation, text
        )
        self.redefinitions.append((relation, text))

    def _check_open(self) -> None:
        if self.done:
            raise TransactionError("this transaction has already committed")

    def _columns(self, relation: str, rows: object) -> tuple[np.ndarray, ...]:
        self._check_open()
        schema = self.schema or self.program.checked.schema
        info = schema.get(relation)
        if info is None or relation == UNIT:
            names = schema.names()
            raise UnknownNameError(f"unknown relation `{relation}`{did_you_mean(relation, names)}")
        if is_reserved(relation):
            raise TransactionError(reserved_message(relation))
        if info.arity == 0:
            return (np.zeros(_nullary_rows(relation, rows), dtype=np.int64),)
        start = len(self.symbols)
        try:
            return to_columns(info, rows, self.symbols)
        finally:
            self._interned(start, len(self.symbols))

    def _interned(self, start: int, end: int) -> None:
        """Note the ids [start, end) its rows added: one run, unless something else
        interned in between (then `discard` keeps them)."""
        if start == end:
            return
        if self.interned is None or self.interned[1] == start:
            self.interned = (start if self.interned is None else self.interned[0], end)
        else:
            self.interned = (end, end)  # interleaved: nothing is known to be only its own

    def discard(self) -> None:
        """It will not commit: forget the symbols only its rows added, if nothing was
        interned after them (a failed commit leaves the symbol table as it was). Once
        its commit began, the commit decides: it forgot them if it undid the epoch, and
        an epoch that happened keeps them (a failure after its commit point)."""
        self.done = True
        if not self.committing:
            self._forget()

    def _forget(self) -> None:
        if self.interned is not None and self.interned[1] == len(self.symbols):
            self.symbols.forget_from(self.interned[0])
        self.interned = None

    def commit(self) -> int:
        """Apply everything as one epoch (also done on leaving the `with` block)."""
        self._check_open()
        self.done = True
        if not self.parts and not self.redefinitions:
            return self.epochs.engine.epoch
        change = self.change
        if change is not None and change.base is not self.program.program:  # defined since
            change = definitions.redefined_all(self.program, self.redefinitions)
        write = Write("commit", self._record, self.requests(), change, undo=self._forget)
        self.committing = True
        return self.epochs.commit(write)

    def _record(self, epoch: int) -> Record:
        schema = self.schema or self.program.checked.schema
        return commit_record(epoch, self.parts, self.redefinitions, schema, self.symbols)

    def requests(self) -> dict[str, Requests]:
        """The inserts and retractions, by relation, as the engine takes them."""
        grouped: dict[str, list[tuple[tuple[np.ndarray, ...], bool]]] = {}
        for relation, cols, inserting in self.parts:
            grouped.setdefault(relation, []).append((cols, inserting))
        schema = self.schema or self.program.checked.schema
        requests = {rel: _requests(parts, _dtypes(schema, rel)) for rel, parts in grouped.items()}
        self.parts = [
            part for rel, parts in grouped.items() for part in _held(rel, parts, requests)
        ]
        return requests


def _nullary_rows(relation: str, rows: object) -> int:
    """How many (empty) rows of a nullary relation `rows` holds."""
    if not isinstance(rows, Iterable):
        raise TransactionError(f"rows for `{relation}` must be iterable")
    found = list(rows)
    if any(not isinstance(r, tuple) or r for r in found):
        raise TransactionError(f"`{relation}` has no columns: its only row is `()`")
    return len(found)


def _held(
    relation: str, parts: list[tuple[tuple[np.ndarray, ...], bool]], requests: dict[str, Requests]
) -> list[Part]:
    """What the transaction keeps of a relation's parts once its request is made (the
    log's record is written from them): the request's own columns when every part
    goes one way, so a bulk load of many batches is held once while it commits, not
    as its batches and their concatenation; otherwise the parts, in order."""
    if len(parts) > 1 and len({inserting for _, inserting in parts}) == 1:
        return [(relation, requests[relation].given, parts[0][1])]
    return [(relation, columns, inserting) for columns, inserting in parts]


def _dtypes(schema: Schema, relation: str) -> tuple[np.dtype, ...] | None:
    """The types a relation's columns are stored at (None: a nullary relation's one
    constant column, as it is): narrow integer columns widen to them when read."""
    kinds = schema.types(relation)
    return tuple(np.dtype(DTYPES[kind]) for kind in kinds) if kinds else None


def _requests(
    parts: list[tuple[tuple[np.ndarray, ...], bool]], dtypes: tuple[np.dtype, ...] | None
) -> Requests:
    arity = len(parts[0][0])
    if len(parts) == 1:  # one insert or retract (a bulk load): its columns as they are
        return Requests(parts[0][0], np.full(len(parts[0][0][0]), parts[0][1]), dtypes)
    columns = tuple(np.concatenate([p[0][i] for p in parts]) for i in range(arity))
    inserting = np.concatenate([np.full(len(p[0][0]) if p[0] else 0, p[1]) for p in parts])
    return Requests(columns, inserting.astype(bool), dtypes)
