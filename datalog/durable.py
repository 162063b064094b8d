"""A durable `Database`: what it logs, how it checkpoints and how it comes back.

Layer: datalog (API). Imports numpy, `datalog.storage` and (for types only)
`datalog.database`.

The log holds what the user asked for, in the user's terms: definitions as
program text and transactions as columns of values (symbols as strings), with
the rules they replaced (`redefine`) as relation and text. A snapshot's program
is the definitions folded into one text (`definitions.program_text`: a
redefinition drops the replaced rules from the texts before it). Opening
restores the newest snapshot (its program is defined again without its facts,
its symbol table and relation contents are loaded as they were)
and then replays the records after it through the ordinary API, which
reproduces the same epochs. See `datalog.storage.store` for the write order.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from datalog import definitions
from datalog.errors import BudgetExceeded, DatalogError, FunctorError, UnboundFunctorError
from datalog.storage.frames import CorruptLogError, DurabilityError
from datalog.storage.layout import LEGACY_LOG
from datalog.storage.records import Change, Commit, Define, Record
from datalog.storage.snapshots import Snapshot
from datalog.storage.store import Logged, Store
from datalog.symbols import SymbolTable
from datalog.system import is_reserved

if TYPE_CHECKING:
    from datalog.database import Database

_log = logging.getLogger("deltalog")
Part = tuple[str, tuple[np.ndarray, ...], bool]


def open_store(db: Database, path: str | os.PathLike[str], sync: bool) -> Store:
    """Lock `path`, restore its snapshot and replay its log into the empty `db`."""
    store = Store(path, sync)
    try:
        snapshot, records = store.recover()
        db._quiet += 1
        try:
            if snapshot is not None:
                _restore(db, snapshot)
            for logged in records:
                _replay_logged(db, logged)
            # a log.jsonl next to a snapshot or records was migrated already: a crash
            # came before its rename (replaying it again would apply it twice)
            legacy = _legacy_records(Path(path)) if snapshot is None and not records else []
            for raw in legacy:
                _replay_legacy(db, raw)
        finally:
            db._quiet -= 1
        db.store = store
        if legacy:  # migrated: the new format holds it all now, in both snapshots kept
            checkpoint(db)  # (the log before them holds none of it: one damaged
            checkpoint(db)  # snapshot must not lose it)
        if (Path(path) / LEGACY_LOG).exists():
            (Path(path) / LEGACY_LOG).rename(Path(path) / f"{LEGACY_LOG}.migrated")
    except BaseException:
        store.close()
        raise
    return store


def mark(db: Database) -> int | None:
    """Where the log ends now, to `undo` back to if what comes next does not happen
    (whether or not its record was written, wholly or in part)."""
    if db.store is None or db._quiet:
        return None
    return db.store.end


def log_define(db: Database, text: str) -> None:
    if db.store is not None and not db._quiet:
        db.store.append(Define(text))


def log_commit(
    db: Database, epoch: int, parts: list[Part], redefinitions: list[tuple[str, str]]
) -> None:
    """Write a transaction's record before it is applied (unless replaying)."""
    if db.store is None or db._quiet:
        return
    changes = []
    for relation, columns, inserting in parts:
        kinds = db.checked.schema.types(relation)
        if kinds:  # a nullary relation's one constant column is logged as it is
            columns = tuple(
                db.symbols.strings(c) if kind == "symbol" else c
                for c, kind in zip(columns, kinds, strict=True)
            )
        changes.append(Change(relation, inserting, columns))
    db.store.append(Commit(epoch, changes, tuple(redefinitions)))


def undo(db: Database, end: int | None) -> None:
    """Cut the log back to `end` (from `mark`): what was written after did not happen."""
    if end is not None and db.store is not None:
        db.store.undo(end)


def checkpoint(db: Database) -> None:
    assert db.store is not None
    relations = {}
    for name, inp in db.engine.inputs.items():
        if name in db.checked.schema.relations and not is_reserved(name):
            state = inp.presence.spine.accumulate(None)
            relations[name] = (state.columns, state.diffs)
    program = definitions.program_text(db.definitions)
    db.store.checkpoint(Snapshot(db.epoch, program, db.symbols.to_list(), relations))
    db.definitions = [definitions.Definition(program)]  # the same program, folded


def _restore(db: Database, snapshot: Snapshot) -> None:
    db.symbols = SymbolTable.from_list(snapshot.symbols)
    if snapshot.program:
        definitions.define(db, snapshot.program, facts=False)
    db.engine.load(snapshot.relations, snapshot.epoch)


def _replay_logged(db: Database, logged: Logged) -> None:
    """Replay one record; one the database rejects (`DatalogError`) is corruption at
    its offset, which `deltalog recover` cuts off. Rejections that depend on this
    process (an unbound functor, a functor's own error, a budget) are not."""
    try:
        _replay(db, logged.record)
    except (UnboundFunctorError, FunctorError, BudgetExceeded):
        raise
    except DatalogError as error:
        reason = f"it does not replay: {error.message}"
        raise CorruptLogError(logged.segment, logged.offset, reason) from error


def _replay(db: Database, record: Record) -> None:
    if isinstance(record, Define):
        definitions.define(db, record.text, facts=True)
        return
    if not record.changes and not record.redefinitions:  # a subscription's epoch (a new
        db.engine.commit({})  # tenant parameter), or one that changed only deltalog.*
    with db.transaction() as tx:
        for relation, text in record.redefinitions:
            tx.redefine(relation, text)
        for change in record.changes:
            rows: Any = change.columns
            if not db.checked.schema.types(change.relation):  # nullary: `()` rows
                rows = [()] * len(change.columns[0])
            (tx.insert if change.inserting else tx.retract)(change.relation, rows)
    if db.epoch != record.epoch:
        raise DurabilityError(f"replay reached epoch {db.epoch}, the log says {record.epoch}")


def _legacy_records(path: Path) -> list[dict[str, Any]]:
    """The records of a `log.jsonl` written before the framed log (a torn last line
    is dropped), to migrate it."""
    legacy = path / LEGACY_LOG
    if not legacy.exists():
        return []
    _log.warning("migrating %s to the framed log", legacy)
    lines = legacy.read_text(encoding="utf-8").splitlines()
    records = []
    for n, line in enumerate(lines):
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            if n != len(lines) - 1:
                raise DurabilityError(f"corrupt line {n + 1} in {legacy}") from None
    return records


def _replay_legacy(db: Database, record: dict[str, Any]) -> None:
    if "define" in record:
        definitions.define(db, record["define"], facts=True)
        return
    with db.transaction() as tx:
        for change in record["changes"]:
            relation, data = change["relation"], change["columns"]
            if db.checked.schema.types(relation):
                data = [np.asarray(column) for column in data]
            else:  # nullary: one empty list per row
                data = [tuple(row) for row in data]
            (tx.insert if change["insert"] else tx.retract)(relation, data)
