"""Transactions: inserts and retractions collected, then committed as one epoch.

Layer: datalog (API). Imports numpy, `datalog.rows`, `datalog.durable` and
`differential.inputs`; `datalog.database` creates them.

A transaction's rows are converted and validated as they are added; `commit`
writes its record to the durable log (if any) before the engine applies it, and
cuts the record off again if applying fails (the engine then leaves nothing of it,
and the live queries are rebuilt).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

import numpy as np

from datalog import durable
from datalog.errors import TransactionError, UnknownNameError, did_you_mean
from datalog.plan.body import UNIT
from datalog.rows import to_columns
from datalog.system import is_reserved, reserved_message
from differential.inputs import Requests

if TYPE_CHECKING:
    from datalog.database import Database


class Transaction:
    """Inserts and retractions, validated as they are added, applied at commit."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self.parts: list[tuple[str, tuple[np.ndarray, ...], bool]] = []
        self.done = False

    def insert(self, relation: str, rows: object) -> None:
        self.parts.append((relation, self._columns(relation, rows), True))

    def retract(self, relation: str, rows: object) -> None:
        self.parts.append((relation, self._columns(relation, rows), False))

    def _columns(self, relation: str, rows: object) -> tuple[np.ndarray, ...]:
        if self.done:
            raise TransactionError("this transaction has already committed")
        info = self.db.checked.schema.get(relation)
        if info is None or relation == UNIT:
            names = self.db.checked.schema.names()
            raise UnknownNameError(f"unknown relation `{relation}`{did_you_mean(relation, names)}")
        if is_reserved(relation):
            raise TransactionError(reserved_message(relation))
        if info.arity == 0:
            return (np.zeros(_nullary_rows(relation, rows), dtype=np.int64),)
        return to_columns(info, rows, self.db.symbols)

    def commit(self) -> int:
        """Apply everything as one epoch (also done on leaving the `with` block)."""
        self.done = True
        self.db._refuse_in_callback("commit")
        if not self.parts:
            return self.db.engine.epoch
        grouped: dict[str, list[tuple[tuple[np.ndarray, ...], bool]]] = {}
        for relation, cols, inserting in self.parts:
            grouped.setdefault(relation, []).append((cols, inserting))
        requests = {rel: _requests(parts) for rel, parts in grouped.items()}
        self.db._checkpoint_if_due()  # before, not after: the commit that grew the log
        offset = durable.log_commit(self.db, self.db.engine.epoch + 1, self.parts)
        try:
            epoch = self.db.engine.commit(requests)
        except BaseException:
            durable.undo(self.db, offset)
            self.db._restart_live()
            raise
        self.db._tick(epoch)
        return epoch


def _nullary_rows(relation: str, rows: object) -> int:
    """How many (empty) rows of a nullary relation `rows` holds."""
    if not isinstance(rows, Iterable):
        raise TransactionError(f"rows for `{relation}` must be iterable")
    found = list(rows)
    if any(not isinstance(r, tuple) or r for r in found):
        raise TransactionError(f"`{relation}` has no columns: its only row is `()`")
    return len(found)


def _requests(parts: list[tuple[tuple[np.ndarray, ...], bool]]) -> Requests:
    arity = len(parts[0][0])
    columns = tuple(np.concatenate([p[0][i] for p in parts]) for i in range(arity))
    inserting = np.concatenate([np.full(len(p[0][0]) if p[0] else 0, p[1]) for p in parts])
    return Requests(columns, inserting.astype(bool))
