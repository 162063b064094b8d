"""A durable `Database`: what it logs, how it checkpoints and how it comes back.

Layer: datalog (API). Imports numpy, `datalog.storage` and `datalog.db.definitions`;
it knows the database only through `Durable`, the little it needs of one.

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

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from datalog.db import definitions
from datalog.db.definitions import ProgramState
from datalog.eval.symbols import SymbolTable
from datalog.lang.errors import BudgetExceeded, DatalogError, FunctorError, UnboundFunctorError
from datalog.lang.schema import Schema
from datalog.lang.system import is_reserved
from datalog.storage.frames import CorruptLogError, DurabilityError
from datalog.storage.records import Change, Commit, Define, Record
from differential.engine import Engine

if TYPE_CHECKING:  # the store's modules load when a database is durable (ADR 0084)
    from datalog.storage.snapshots import Snapshot
    from datalog.storage.store import Logged, Store


class Log:
    """Where writes are recorded before they are applied: a durable directory's
    `Store`, or nothing (in memory). Nothing is written while replaying."""

    def __init__(self, checkpoint_every: int = 1000) -> None:
        self.store: Store | None = None
        self.replaying = 0  # >0 while the log itself is being replayed
        self.checkpoint_every = checkpoint_every  # records after which a checkpoint is due

    @property
    def writing(self) -> bool:
        return self.store is not None and not self.replaying

    @contextmanager
    def replay(self) -> Iterator[None]:
        self.replaying += 1
        try:
            yield
        finally:
            self.replaying -= 1

    def mark(self) -> int | None:
        """Where the log ends now, to `undo` back to if what comes next does not happen
        (whether or not its record was written, wholly or in part)."""
        return self.store.end if self.store is not None and self.writing else None

    def append(self, record: Record) -> None:
        if self.store is not None and self.writing:
            self.store.append(record)

    def undo(self, end: int | None) -> None:
        """Cut the log back to `end` (from `mark`): what was written after did not happen."""
        if end is not None and self.store is not None:
            self.store.undo(end)

    def wants_checkpoint(self) -> bool:
        store = self.store
        return store is not None and self.writing and store.wants_checkpoint(self.checkpoint_every)


class Durable(Protocol):
    """What this module needs of a database."""

    engine: Engine
    symbols: SymbolTable
    log: Log

    @property
    def state(self) -> ProgramState: ...

    def define(self, text: str) -> None: ...

    def restore_program(self, text: str) -> None: ...

    def replay_commit(self, record: Commit) -> int: ...


_log = logging.getLogger("deltalog")
Part = tuple[str, tuple[np.ndarray, ...], bool]


def open_store(db: Durable, path: str | os.PathLike[str], sync: bool) -> Store:
    """Lock `path`, restore its snapshot and replay its log into the empty `db`."""
    from datalog.storage.layout import LEGACY_LOG
    from datalog.storage.store import Store

    store = Store(path, sync)
    try:
        snapshot, records = store.recover()
        with db.log.replay():
            if snapshot is not None:
                _restore(db, snapshot)
            for logged in records:
                _replay_logged(db, logged)
            # a log.jsonl next to a snapshot or records was migrated already: a crash
            # came before its rename (replaying it again would apply it twice)
            legacy = _legacy_records(Path(path)) if snapshot is None and not records else []
            for raw in legacy:
                _replay_legacy(db, raw)
        db.log.store = store
        if legacy:  # migrated: the new format holds it all now, in both snapshots kept
            for _ in range(2):  # (the log before them holds none of it: one damaged
                checkpoint(db.log, db.engine, db.state, db.symbols)  # snapshot must not lose it)
        if (Path(path) / LEGACY_LOG).exists():
            (Path(path) / LEGACY_LOG).rename(Path(path) / f"{LEGACY_LOG}.migrated")
    except BaseException:
        store.close()
        raise
    return store


def commit_record(
    epoch: int,
    parts: list[Part],
    redefinitions: list[tuple[str, str]],
    schema: Schema,
    symbols: SymbolTable,
) -> Commit:
    """A transaction's record, in the user's terms (symbols as strings)."""
    changes = []
    for relation, columns, inserting in parts:
        kinds = schema.types(relation)
        if kinds:  # a nullary relation's one constant column is logged as it is
            columns = tuple(
                symbols.strings(c) if kind == "symbol" else c
                for c, kind in zip(columns, kinds, strict=True)
            )
        changes.append(Change(relation, inserting, columns))
    return Commit(epoch, changes, tuple(redefinitions))


def checkpoint(log: Log, engine: Engine, state: ProgramState, symbols: SymbolTable) -> None:
    """Snapshot the base relations, the program and the symbols now; the log they
    cover goes (`Store.checkpoint`)."""
    from datalog.storage.snapshots import Snapshot

    store = log.store
    assert store is not None
    relations = {}
    for name, inp in engine.inputs.items():
        if name in state.checked.schema.relations and not is_reserved(name):
            contents = inp.presence.spine.accumulate(None)
            relations[name] = (contents.columns, contents.diffs)
    program = definitions.program_text(state.definitions)
    store.checkpoint(Snapshot(engine.epoch, program, symbols.to_list(), relations))
    state.definitions = [definitions.Definition(program)]  # the same program, folded


def _restore(db: Durable, snapshot: Snapshot) -> None:
    db.symbols.load(snapshot.symbols)
    if snapshot.program:
        db.restore_program(snapshot.program)
    db.engine.load(snapshot.relations, snapshot.epoch)


def _replay_logged(db: Durable, logged: Logged) -> None:
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


def _replay(db: Durable, record: Record) -> None:
    if isinstance(record, Define):
        db.define(record.text)
        return
    epoch = db.replay_commit(record)
    if epoch != record.epoch:
        raise DurabilityError(f"replay reached epoch {epoch}, the log says {record.epoch}")


def _legacy_records(path: Path) -> list[dict[str, Any]]:
    """The records of a `log.jsonl` written before the framed log (a torn last line
    is dropped), to migrate it."""
    import json

    from datalog.storage.layout import LEGACY_LOG

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


def _replay_legacy(db: Durable, record: dict[str, Any]) -> None:
    if "define" in record:
        db.define(record["define"])
        return
    changes = []
    for change in record["changes"]:
        relation, data = change["relation"], change["columns"]
        if db.state.checked.schema.types(relation):
            columns = tuple(np.asarray(column) for column in data)
        else:  # nullary: one constant column
            columns = (np.zeros(len(data), dtype=np.int64),)
        changes.append(Change(relation, bool(change["insert"]), columns))
    db.replay_commit(Commit(db.engine.epoch + 1, changes, ()))
