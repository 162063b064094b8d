"""The one path every write takes: log it, apply it, repair on failure, deliver.

Layer: datalog (API). Imports `datalog.db.definitions`, `datalog.db.queries`,
`datalog.db.durable`, `datalog.db.interrupts` and `differential`; `Database`'s writes
(`define`, `redefine`, transactions) all call `Epochs.commit`, and nothing else
advances an epoch: reads (queries, subscriptions, `why`, `as_of`) never do.

A `Write` is what one request changes: the record the log keeps of it, the rows it
inserts and retracts (`requests`, by relation), the program it installs (a
definition or a redefinition, checked already), and whether it takes an epoch (a
definition that only declares takes none). `commit`:

1. refuses inside a subscriber's callback, repairs what an earlier failure left,
   checkpoints if one is due (before: the write that grew the log returns without
   waiting for the snapshot);
2. writes the record (durable databases), installs the program, creates the inputs
   of new relations, rebuilds the live queries whose rules change (each holds its
   difference) and commits the epoch, carrying the parameters that shared
   dataflows gained or lost since the last commit;
3. if anything fails before the epoch is decided, nothing of it stays: the record
   is cut off, the old program is back, new inputs go, and the live queries are
   repaired (their answers are as before: nothing is delivered);
4. from the epoch's commit point on, interrupts wait (`datalog.db.interrupts`) and no
   budget binds (a `BudgetExceeded` says nothing changed, docs/adr/0039): the
   program version is recorded, joiners of shared dataflows get their answers,
   anything a failure dropped is rebuilt and told what it missed, held rule changes
   and paced subscribers are delivered; a failure there is raised once everything
   else is done (the write happened: see ADR 0032).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from contextlib import ExitStack
from dataclasses import dataclass, field

import numpy as np

from datalog.db.definitions import ProgramChange, ProgramState
from datalog.db.durable import Log, checkpoint
from datalog.db.interrupts import guard
from datalog.db.queries import LiveQueries
from datalog.eval.expressions import DTYPES
from datalog.eval.symbols import SymbolTable
from datalog.storage.records import Record
from differential.budget import unbudgeted
from differential.engine import Engine
from differential.inputs import Requests

_log = logging.getLogger("deltalog")


@dataclass
class Write:
    """What one request changes (module docstring)."""

    what: str  # "commit", "define", ...: for messages
    record: Callable[[int], Record]  # the log's record of it, given its epoch
    requests: Mapping[str, Requests] = field(default_factory=dict)
    change: ProgramChange | None = None
    new_epoch: bool = True
    undo: Callable[[], None] = lambda: None  # what to forget if it does not happen


class Epochs:
    """The commit path of one database (module docstring)."""

    def __init__(
        self,
        engine: Engine,
        program: ProgramState,
        live: LiveQueries,
        log: Log,
        symbols: SymbolTable,
    ) -> None:
        self.engine, self.program, self.live, self.log = engine, program, live, log
        self.symbols = symbols

    def commit(self, write: Write) -> int:
        """Apply `write`; the epoch it took (the current one if it took none)."""
        self.live.refuse_in_callback(write.what)
        self.live.repair_if_suspect()
        if self.log.wants_checkpoint():  # before: the write that grew the log returns
            checkpoint(self.log, self.engine, self.program, self.symbols)  # without waiting
        engine, decided = self.engine, False
        start, end = engine.epoch, self.log.mark()
        before, created = None, []
        try:
            with guard() as interrupts, ExitStack() as decided_part:

                def seal() -> None:
                    nonlocal decided
                    interrupts.defer()
                    decided_part.enter_context(unbudgeted())  # nor may a budget stop it
                    decided = True

                if self.log.writing:
                    self.log.append(write.record(start + 1 if write.new_epoch else start))
                if write.change is not None:
                    before = self.program.install(write.change)
                    created = self._create_inputs(write.change)
                    self.live.hold_changes(write.change.heads)
                failure: BaseException | None = None
                if write.new_epoch:
                    requests = {**write.requests, **self.live.tenants.requests()}
                    self.live.arrive()
                    try:
                        if write.change is None:  # (a rule change rebuilt what it touches)
                            self.live.before_epoch(requests)
                        engine.commit(requests, sealing=seal)
                    except BaseException as error:
                        if not decided:
                            self.live.drop_arrived()
                            raise
                        failure = error  # after its epoch (a listener): finish it first
                        self.live.suspect = True
                else:
                    seal()
                self._settle(write, engine.epoch, failure)
        except BaseException:
            if not decided:  # it did not happen: nothing of it stays
                self._undo(write, end, before, created)
            raise
        return engine.epoch

    def _settle(self, write: Write, epoch: int, failure: BaseException | None) -> None:
        """The write happened (epoch `epoch`): finish it whatever fails, and raise the
        first failure (`failure`, if the epoch raised one) last."""
        change = write.change
        touched = frozenset(write.requests) | (change.heads if change else frozenset())
        if change is not None:
            try:
                self.program.committed(change, epoch, self.engine.oldest_readable())
            except BaseException as error:
                failure = failure or error
            self.live.mark_current()
        rows = write.requests if change is None else None  # with new rules, not rows alone
        failure = self.live.settle(epoch, write.new_epoch, touched, rows) or failure
        if write.new_epoch and change is None:  # what it cost, into the models (ADR 0064)
            self.live.adaptive.learn(self.live.by_key.values())
        if failure is not None:
            raise failure

    def _undo(
        self,
        write: Write,
        end: int | None,
        before: object | None,
        created: list[str],
    ) -> None:
        self.log.undo(end)
        if before is not None:
            self.program.restore(before)  # type: ignore[arg-type]
        for name in created:
            self.engine.remove_input(name)
        write.undo()
        self.live.suspect = True
        try:
            self.live.repair()
        except BaseException:  # the failure being raised says what happened; this one
            _log.exception("repairing live queries after a failed %s", write.what)

    def _create_inputs(self, change: ProgramChange) -> list[str]:
        created = []
        for name in change.checked.schema:
            if name in self.engine.inputs:
                continue
            info = change.checked.schema[name]
            # a nullary relation is stored with one constant column
            dtypes = [np.dtype(DTYPES[t]) for t in info.types] or [np.dtype(np.int64)]
            self.engine.create_input(info.name, dtypes, info.semantics)
            created.append(name)
        return created
