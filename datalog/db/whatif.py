"""What if: the changes a transaction would deliver, without committing it
(docs/adr/0047).

Layer: datalog (API). Imports `datalog.db.transaction`, `datalog.db.epochs` and
`datalog.db.change`; `Database.what_if` and `Database.hypothetical` are thin wrappers.

A `Hypothetical` is a transaction whose `commit` commits nothing here: it forks the
process, and the child, a copy-on-write image of the whole database at this instant,
commits the rows on its own copy through the ordinary commit path (`Epochs.commit`,
with a log that writes nothing) and sends back, for each query asked (default: every
live query), the `Change` its subscribers would receive. The parent waits and
returns them; nothing in it moved: epoch, log, subscribers, arrangements, `as_of`,
and the symbols only the hypothetical's rows interned are forgotten. In the child,
live queries reach only the recorder (their subscribers and explanation watches are
dropped first), a query asked that is not live is subscribed there alone, and a
failure (a bad row, a `BudgetExceeded`: the child keeps the caller's deadline) is
sent back and raised here. The child never returns into the caller's code: it ends
with `os._exit`.

Why a fork (measured, docs/adr/0047): undoing a commit on the engine itself means
rebuilding every live dataflow the epoch ran (seconds for a 1M-edge reach, against
under a millisecond for the commit), and the operators keep state no epoch-level
undo restores; a fork costs the page tables of the process (tens of milliseconds
for a few hundred megabytes) plus the commit, whatever the number of dataflows.
"""

from __future__ import annotations

import contextlib
import gc
import os
import pickle
import struct
import sys
import threading
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from datalog.db.change import Change
from datalog.db.epochs import Epochs, Write
from datalog.db.live import LiveQuery
from datalog.db.tenants import Tenant
from datalog.db.transaction import Transaction
from datalog.eval.rows import to_rows
from datalog.eval.symbols import SymbolTable
from datalog.lang.errors import DatalogError, TransactionError, UnsupportedError
from datalog.storage.records import Record
from differential import hypothetical
from differential.batch import Updates

Subscribe = Callable[[str, Callable[[Change], None]], object]
Outcome = tuple[str, Any]  # ("changes", {text: (rows, diffs, columns)}) or ("error", ...)


def fork_available() -> bool:
    """Whether a hypothetical can run in a forked child here (Linux and the BSDs)."""
    return hasattr(os, "fork") and sys.platform.startswith(("linux", "freebsd", "openbsd"))


class _NoLog:
    """The child's log: it records nothing and never checkpoints."""

    writing = False

    def wants_checkpoint(self) -> bool:
        return False

    def mark(self) -> None:
        return None

    def append(self, record: Record) -> None:
        pass

    def undo(self, end: int | None) -> None:
        pass


class Hypothetical(Transaction):
    """A transaction that is never committed: `commit` computes `changes`, what
    committing it would deliver (module docstring), and forgets its symbols."""

    def __init__(
        self,
        transaction: Transaction,
        subscribe: Subscribe,
        queries: Sequence[str] | None = None,
    ) -> None:
        super().__init__(transaction.program, transaction.symbols, transaction.epochs)
        self.subscribe, self.queries = subscribe, queries
        self.changes: dict[str, Change] = {}
        # How `changes` was computed: "in process" (an undone epoch, docs/adr/0052) or
        # "fork" (a child process, docs/adr/0047); None before.
        self.how: str | None = None

    def __repr__(self) -> str:
        return super().__repr__().replace("<Transaction", "<Hypothetical")

    def redefine(self, relation: str, text: str) -> None:
        raise TransactionError("a hypothetical takes inserts and retractions, not rules")

    def commit(self) -> int:
        """Compute `changes`; the epoch stays the current one, which it returns."""
        if self.done:
            raise TransactionError("this hypothetical has already been answered")
        try:
            self.changes = self._changes()
        finally:
            self.discard()
        return self.epochs.engine.epoch

    def _changes(self) -> dict[str, Change]:
        live = self.epochs.live
        live.repair_if_suspect()  # as a commit would first (a read does too)
        if self._in_process_covers():
            self.how = "in process"
            return self._in_process()
        self.how = "fork"
        if not fork_available():
            raise UnsupportedError("what_if of this query needs os.fork (Linux or a BSD)")
        epoch = self.epochs.engine.epoch + 1
        kind, found = _in_child(self._child)
        if kind == "error":
            raise found
        return {text: Change(rows, diffs, epoch, columns=tuple(columns))
                for text, (rows, diffs, columns) in found.items()}  # fmt: skip

    def _in_process_covers(self) -> bool:
        """Whether the epoch can run here and be undone (docs/adr/0052): every query
        asked is live, and no live dataflow reads the engine's own description."""
        live = {query.query_text for query in self.epochs.live.by_key.values()}
        asked = set(self.queries or ())
        return asked <= live and hypothetical.covers(self.epochs.engine)

    def _in_process(self) -> dict[str, Change]:
        """Run the epoch through the live dataflows and undo it (docs/adr/0052): each
        live query's change as its subscribers would receive it."""
        live, engine = self.epochs.live, self.epochs.engine
        epoch, start = engine.epoch + 1, len(self.symbols)
        requests = {**self.requests(), **live.tenants.requests()}
        collecting = gc.isenabled()
        gc.disable()  # the savepoint makes many small objects, all dropped at once
        try:
            outputs = {id(out): updates for out, updates in hypothetical.outputs(engine, requests)}
            found: dict[str, Change] = {}
            for query, updates in self._routed(outputs, epoch).items():
                if query.query_text not in found:  # (two plans of one query agree)
                    rows = to_rows(updates.columns, query.types, self.symbols, len(updates))
                    found[query.query_text] = Change(
                        rows, updates.diffs.tolist(), epoch, columns=query.columns
                    )
        finally:
            if len(self.symbols) > start:  # interned by the epoch (a functor's result)
                self.symbols.forget_from(start)
            if collecting:
                gc.enable()
        if self.queries is not None:
            return {text: found[text] for text in self.queries}
        return found

    def _routed(self, outputs: dict[int, Updates], epoch: int) -> dict[LiveQuery, Updates]:
        """Each live query's updates among the dataflows' `outputs` (by output id)."""
        live = self.epochs.live
        found: dict[LiveQuery, Updates] = {}
        tenants = []
        for query in live.by_key.values():
            if query.tenant is not None:
                tenants.append(query.tenant)
            elif query.plan is not None:
                found[query] = outputs.get(id(query.plan.output), query.state.empty())
        for tenant in {id(t): t for t in tenants}.values():
            assert isinstance(tenant, Tenant) and tenant.plan is not None
            output = tenant.plan.output
            updates = outputs.get(id(output), output.capture.stream.empty())
            found.update(live.tenants.changes(tenant, updates, epoch))
        return found

    def _child(self) -> dict[str, Found]:
        """In the child: commit on its copy and record what each query receives."""
        live = self.epochs.live
        live.watches.clear()
        found: dict[str, Found] = {}
        for query in live.by_key.values():  # the live ones: straight from their output
            query.subscribers.clear()
            found.setdefault(query.query_text, ([], [], query.columns))
            query.deliver = partial(_record, found, query)  # type: ignore[method-assign]
        for text in dict.fromkeys(self.queries or ()):
            if text not in found:  # another query: subscribed here alone
                found[text] = ([], [], ())
                self.subscribe(text, partial(_take, found, text))
        epochs = Epochs(self.epochs.engine, self.program, live, _NoLog(), self.symbols)  # type: ignore[arg-type]
        epochs.commit(Write("what_if", _no_record, self.requests()))
        if self.queries is not None:
            return {text: found[text] for text in self.queries}
        return found


Found = tuple[list[Any], list[int], tuple[str, ...]]  # rows, diffs, columns


def _record(
    found: dict[str, Found], query: LiveQuery, updates: Updates, epoch: int, symbols: SymbolTable
) -> None:
    """A live query's delivery, recorded instead of told (in the child)."""
    rows, diffs, _ = found[query.query_text]
    rows += to_rows(updates.columns, query.types, symbols, len(updates))
    diffs += updates.diffs.tolist()


def _take(found: dict[str, Found], text: str, change: Change) -> None:
    """A change of a query subscribed in the child (its snapshot gives the columns)."""
    rows, diffs, _ = found[text]
    if not change.snapshot:
        rows += change.rows
        diffs += change.diffs
    found[text] = (rows, diffs, change.columns)


def _no_record(epoch: int) -> Record:
    raise AssertionError("a hypothetical is never logged")


def _in_child(work: Callable[[], Any]) -> Outcome:
    """Run `work` in a forked child; its result, or the error it raised."""
    read, write = os.pipe()
    pid, frozen = -1, gc.get_freeze_count() > 0  # (the caller's own freeze stays)
    gc.freeze()  # the collector must not visit (and so copy) every page in the child
    try:
        pid = os.fork()
    finally:
        if pid != 0 and not frozen:
            gc.unfreeze()
        if pid == -1:  # no child (out of processes or memory)
            os.close(read)
            os.close(write)
    if pid == 0:  # the child: never returns
        gc.disable()
        _close_all_but(write)
        code = 0
        try:
            _send(write, ("changes", work()))
        except BaseException as error:
            code = 1
            try:
                _send(write, ("error", _portable(error)))
            except BaseException:
                code = 2
        finally:
            os._exit(code)
    os.close(write)
    try:
        data = _receive(read)
    except BaseException:
        _stop(pid)
        raise
    finally:
        os.close(read)
    _reap(pid)
    if data is None:
        return "error", DatalogError("the hypothetical's process ended without an answer")
    return pickle.loads(data)


def _close_all_but(fd: int) -> None:
    """In the child, every inherited descriptor but `fd` and the standard three: a
    durable database's `flock` (shared with the parent's descriptor) must not outlive
    the parent's `close` while the child is torn down, nor a server's sockets live on
    in it. The child's commit reads memory only (its log writes nothing)."""
    os.closerange(3, fd)
    os.closerange(fd + 1, os.sysconf("SC_OPEN_MAX") if hasattr(os, "sysconf") else 65536)


def _portable(error: BaseException) -> BaseException:
    """`error` if it survives pickling, else a `DatalogError` with its message."""
    try:
        pickle.loads(pickle.dumps(error))
        return error
    except Exception:
        return DatalogError(f"{type(error).__name__}: {error}")


def _send(fd: int, outcome: Outcome) -> None:
    data = pickle.dumps(outcome)
    view = memoryview(struct.pack("<Q", len(data)) + data)
    while view:
        view = view[os.write(fd, view) :]
    os.close(fd)


def _receive(fd: int) -> bytes | None:
    chunks: list[bytes] = []
    while chunk := os.read(fd, 1 << 20):
        chunks.append(chunk)
    data = b"".join(chunks)
    if len(data) < 8 or len(data) != 8 + struct.unpack("<Q", data[:8])[0]:
        return None
    return data[8:]


def _reap(pid: int) -> None:
    """Collect the child once it has exited, without waiting for it here: it sent its
    answer, and tearing down its copy of the memory takes as long as the fork did."""

    def wait() -> None:
        with contextlib.suppress(ChildProcessError):  # another waiter reaped it
            os.waitpid(pid, 0)

    threading.Thread(target=wait, daemon=True, name="what_if reaper").start()


def _stop(pid: int) -> None:
    """The caller was interrupted: the child goes too."""
    try:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
    except OSError:
        pass
