"""The engine: base relations, live dataflows, and the epoch sequencer.

Layer: differential (top of the layer). Imports the other differential modules;
the dataflows it runs and their views are `differential.graph`'s.

`commit` is atomic and epoch at a time: the requested changes of every input
become diffs at the next epoch, every live dataflow runs until no scope has
pending work, each dataflow's outputs for that epoch are handed to its
listeners, and only then do the shared arrangements seal the epoch and the
frontier advance. Dataflows are built and dropped between commits; dropping
one releases its trace handles and the arrangements nobody reads any more.

History: `Engine(history=N)` keeps the base relations' states of the last N
epochs readable (`state_as_of`); every base input's state trace compacts no
further than `oldest_readable()`. `None` keeps every epoch since the first commit
(or since `load`); 0 and 1 keep only the current epoch. Internal inputs (created
with `history=False`, and views) keep no history: nothing reads them in the past.
Everything else compacts to the current epoch as it closes (ADR 0040).

Views (`create_view`) are inputs whose contents a dataflow computes: every epoch
the views run first, in creation order (a view reads base inputs and earlier
views), and their output becomes that epoch's batch of their input, so the other
dataflows read a derived collection through shared arrangements exactly as they
read a base relation. One dataflow may compute several views (a group: a mutually
recursive stratum's relations); it runs once an epoch for all of them. A view lives
while a dataflow reads its input, or that of another view of its group.

Late inputs (`create_input(..., late=True)`) describe the engine itself: their
changes for an epoch are asked of `late_changes` once every dataflow that reads
no late input has run that epoch, and only then do the dataflows that read one
run it. A commit pays nothing for them while no live dataflow reads one.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence

import numpy as np

from differential.batch import Column, Diffs, Updates
from differential.budget import unbudgeted
from differential.graph import Dataflow, Output, View
from differential.inputs import Input, Requests, Semantics
from differential.memory import use_small_pages
from differential.time import column
from differential.tuning import TUNING

LateChanges = Callable[[int], Mapping[str, Requests]]


class Engine:
    """Inputs, dataflows and epochs. Not thread-safe: callers serialize commits."""

    def __init__(self, history: int | None = 0) -> None:
        use_small_pages()  # see differential.memory
        assert history is None or history >= 0, "history is None or a count of epochs"
        self.epoch = 0  # the last committed epoch; the first commit is epoch 1
        self.history = history
        self.floor = 1  # the first epoch with a readable state: raised by `load`
        self.inputs: dict[str, Input] = {}
        self.dataflows: list[Dataflow] = []
        self.views: list[View] = []  # in creation order: a view reads only earlier ones
        # The late inputs' changes of an epoch, asked for when a live dataflow reads one.
        self.late_changes: LateChanges | None = None
        self.retiring: list[Dataflow] = []  # dataflows whose drop has not finished
        self.resting: list[Dataflow] = []  # live dataflows sitting out an epoch (`rest`)
        self.clock: Callable[[], float] = time.thread_time  # `Dataflow.spent`; tests fake it

    def create_input(
        self,
        name: str,
        dtypes: Sequence[np.dtype],
        semantics: Semantics = "set",
        late: bool = False,
        history: bool = True,
    ) -> Input:
        """A new input; `history=False` for an internal one, which `state_as_of` never
        reads at a past epoch (its state compacts to the current epoch)."""
        if name in self.inputs:
            raise ValueError(f"input `{name}` exists")
        self.inputs[name] = Input(name, dtypes, semantics, late, history)
        self.inputs[name].keep_from(self.oldest_readable())
        return self.inputs[name]

    def remove_input(self, name: str) -> None:
        """Forget an input that no live dataflow reads (its creator failed; it is
        empty, so no epoch ever held anything of it)."""
        inp = self.inputs.pop(name, None)
        assert inp is None or not len(inp.presence), f"input `{name}` holds rows"

    def oldest_readable(self) -> int:
        """The oldest epoch whose base relations `state_as_of` reads exactly (above the
        current epoch when nothing is readable yet: before the first commit)."""
        if self.history is None:
            return self.floor
        return max(self.floor, self.epoch - max(self.history, 1) + 1)

    def state_as_of(self, name: str, epoch: int) -> Updates:
        """Input `name`'s rows and counts at the end of `epoch`, which must be readable."""
        oldest = self.oldest_readable()
        if not oldest <= epoch <= self.epoch:
            raise ValueError(f"epoch {epoch} is not readable: epochs {oldest} to {self.epoch} are")
        return self.inputs[name].state_as_of(epoch)

    def _keep_history(self) -> None:
        """Let each input's history before the oldest readable epoch collapse."""
        oldest = self.oldest_readable()
        for inp in self.inputs.values():
            inp.keep_from(oldest)

    def view(self, key: Hashable) -> View | None:
        """The live view created under `key`, if any."""
        return next((v for v in self.views if v.key == key), None)

    def create_view(
        self,
        dataflow: Dataflow,
        parts: Sequence[tuple[Hashable, str, Output]],
        notes: Sequence[str] = (),
    ) -> list[Input]:
        """Start `dataflow` (reading no late input); each `(key, name, output)` of
        `parts` (a set: diffs +1 or -1) becomes input `name`, kept current each epoch
        before other dataflows run: one group, run once an epoch, gone when unread."""
        names = [name for _, name, _ in parts]
        if dataflow.late or len(set(names)) < len(names) or set(names) & self.inputs.keys():
            raise ValueError(f"views {names}: a name is taken or the dataflow reads a late input")
        try:
            dataflow.run()
        except BaseException:
            dataflow.release()
            self._drop_unread()
            raise
        for key, name, output in parts:
            source = Input(name, output.capture.stream.dtypes, history=False)
            source.stage(output.capture.drain(), self.epoch)
            source.seal(self.epoch + 1)
            self.inputs[name] = source
            self.views.append(View(key, source, dataflow, output, notes))
        dataflow.advance(self.epoch + 1)
        return [self.inputs[name] for name in names]

    def group(self, view: View) -> list[View]:
        """The views computed by `view`'s dataflow (itself included), in creation order."""
        return [v for v in self.views if v.dataflow is view.dataflow]

    def run_views(self, views: Sequence[View], epoch: int) -> None:
        """Run `views` (in creation order) at `epoch`: each group's dataflow once, then
        its outputs staged as that epoch's batches, before a later view reads them."""
        ran: Dataflow | None = None
        for view in views:  # a group's views are created, and go, together
            if view.dataflow is not ran:
                ran = view.dataflow
                ran.run()
            view.stage(epoch)

    def view_flows(self) -> list[Dataflow]:
        """The views' dataflows, each once, in the order a commit runs them."""
        return list({id(v.dataflow): v.dataflow for v in self.views}.values())

    @property
    def reads_late(self) -> bool:
        """Whether some live dataflow reads a late input."""
        return any(df.late for df in self.dataflows)

    def dataflow(self, name: str, one_epoch: bool = False) -> Dataflow:
        """A new, empty dataflow; build it, then call `start`. `one_epoch`: it is
        dropped after its first run (a one-shot read), so its scopes' times are
        totally ordered and its arrangements may compact as they go (ADR 0062)."""
        dataflow = Dataflow(name, self.epoch, self.inputs, lambda: self.clock())
        dataflow.root.one_epoch = one_epoch
        return dataflow

    def start(self, dataflow: Dataflow) -> None:
        """Run a built dataflow over the current state (its snapshot) and make it live."""
        dataflow.run()
        once = dataflow.root.one_epoch  # dropped next: holds nothing for later epochs
        if once and TUNING.compact_rounds:
            dataflow.drop_operators()
        dataflow.deliver(self.epoch)
        if not once:
            dataflow.advance(self.epoch + 1)
        self.dataflows.append(dataflow)

    def retire(self, *dataflows: Dataflow) -> None:
        """Drop `dataflows`, surely: all are marked before the first is dropped, so a
        drop that an interrupt (KeyboardInterrupt, MemoryError) cuts short finishes
        at the next `retire`, `commit` or `stats` instead of leaving any of them
        computing for nobody."""
        self.retiring.extend(dataflows)
        self.finish_retiring()

    def finish_retiring(self) -> None:
        while self.retiring:
            self.drop(self.retiring[0])
            self.retiring.pop(0)

    def rest(self, flows: Iterable[Dataflow]) -> None:
        """Let live `flows` sit out the coming epoch, which their owner knows changes no
        input they read: they neither run nor advance (and miss nothing) until `wake`."""
        resting = {id(df) for df in flows}
        self.resting += [df for df in self.dataflows if id(df) in resting]
        self.dataflows[:] = [df for df in self.dataflows if id(df) not in resting]

    def wake(self) -> None:
        """The resting dataflows live again (after their epoch, or one that failed)."""
        self.dataflows.extend(self.resting)
        self.resting = []

    def drop(self, dataflow: Dataflow) -> None:
        """Forget `dataflow` (again, harmlessly; resting or not) and what only it read."""
        if dataflow in self.dataflows:
            self.dataflows.remove(dataflow)
        if dataflow in self.resting:
            self.resting.remove(dataflow)
        dataflow.release()
        self._drop_unread()

    def _drop_unread(self) -> None:
        """Forget arrangements and views nobody reads any more (a view last: dropping
        it may leave earlier views it read unread too)."""
        for inp in self.inputs.values():
            inp.drop_unread()
        for view in reversed(list(self.views)):
            group = self.group(view)
            if view in self.views and not any(v.read for v in group):
                for member in group:
                    self.views.remove(member)
                    del self.inputs[member.input.name]
                view.dataflow.release()
                for inp in self.inputs.values():
                    inp.drop_unread()

    def commit(
        self, requests: Mapping[str, Requests], sealing: Callable[[], None] | None = None
    ) -> int:
        """Apply the requested changes as one epoch; returns the epoch.

        All or nothing: if computing the diffs or running a dataflow raises
        (any exception, KeyboardInterrupt and MemoryError included), the inputs
        are as they were, the epoch does not advance, every live dataflow is
        dropped (its operators may hold half of the epoch) and the exception
        propagates; the caller rebuilds the dataflows it still needs.

        Late inputs take no requests here: if a live dataflow reads one, their
        changes come from `late_changes(epoch)` once the other dataflows have run.

        `sealing` is called at the commit point, once everything is computed and
        right before the epoch is decided: whatever raises before it aborts the
        epoch, and from it on the epoch happens (its caller stops deferring
        interrupts there, `datalog.db.interrupts`).
        """
        self.finish_retiring()
        epoch = self.epoch + 1
        late = [name for name in requests if self.inputs[name].late]
        if late:
            raise ValueError(f"late inputs {late} change only through `late_changes`")
        try:
            self._stage(requests, epoch)
            self.run_views(self.views, epoch)
            for df in self.dataflows:
                if not df.late:
                    df.run()
            readers = [df for df in self.dataflows if df.late]
            if readers and self.late_changes is not None:
                self._stage(self._late_requests(epoch), epoch)
            for df in readers:
                df.run()
            if sealing is not None:
                sealing()
        except BaseException:
            self._abort()
            raise
        self.epoch = epoch
        with unbudgeted():  # past the commit point no budget may stop the epoch
            self._finish(epoch)
        return epoch

    def _finish(self, epoch: int) -> None:
        """Seal, compact and deliver the committed `epoch`, exempt from any budget (a
        `BudgetExceeded` says nothing changed). What fails now (a listener's
        KeyboardInterrupt, a MemoryError while compacting) cannot undo the epoch: the
        other dataflows still advance and deliver, a dataflow that failed is dropped
        (its owner rebuilds it: `self.epoch` moved, so it knows the epoch happened),
        and the first failure is raised once all are done. An input's seal, which the
        epoch cannot do without, is tried once more."""
        failure: BaseException | None = None
        for inp in self.inputs.values():
            try:
                inp.seal(epoch + 1)
            except BaseException as error:  # a signal's KeyboardInterrupt, say: sealing
                failure = failure or error  # is idempotent, and the epoch needs it
                inp.seal(epoch + 1)
        try:
            self._keep_history()
        except BaseException as error:
            failure = failure or error
        for flow in self.view_flows():
            try:
                flow.advance(epoch + 1)
            except BaseException as error:  # compaction only: the view stays exact
                failure = failure or error
        for df in list(self.dataflows):  # a listener may drop dataflows meanwhile
            if df in self.dataflows:
                try:
                    df.advance(epoch + 1)
                    df.deliver(epoch)
                except BaseException as error:
                    failure = failure or error
                    self.drop(df)
        if failure is not None:
            raise failure

    def _stage(self, requests: Mapping[str, Requests], epoch: int) -> None:
        """Stage the diffs `requests` make at `epoch` (all computed before any is staged)."""
        staged = {name: self.inputs[name].diffs(req, epoch) for name, req in requests.items()}
        for name, diffs in staged.items():
            self.inputs[name].stage(diffs, epoch)

    def _late_requests(self, epoch: int) -> Mapping[str, Requests]:
        assert self.late_changes is not None
        requests = self.late_changes(epoch)
        early = [name for name in requests if not self.inputs[name].late]
        if early:  # the dataflows reading them have run this epoch already
            raise ValueError(f"`late_changes` may change only late inputs, not {early}")
        return requests

    def amend(self, requests: Mapping[str, Requests]) -> None:
        """Apply `requests` to late inputs that no live dataflow reads, at the current
        epoch, running nothing: their contents made current before a dataflow that
        will read them is built."""
        read = {op.shared for df in [*self.dataflows, *self.resting] for op in df.imports}
        for name in requests:
            source = self.inputs[name]
            if not source.late or read & {source.presence, *source.arrangements.values()}:
                raise ValueError(f"input `{name}` is not late or is read by a dataflow")
        try:
            self._stage(requests, self.epoch)
        except BaseException:
            for name in requests:
                self.inputs[name].unstage()
            raise
        for name in requests:
            self.inputs[name].seal(self.epoch + 1)

    def _readers(self, view: View) -> int:
        """How many dataflows (views' included) read `view`."""
        shared = set(view.input.arrangements.values())
        flows = [*self.dataflows, *self.view_flows()]
        return sum(any(op.shared in shared for op in df.imports) for df in flows)

    def _abort(self) -> None:
        for inp in self.inputs.values():
            inp.unstage()
        for df in list(self.dataflows):
            self.drop(df)

    def load(self, contents: Mapping[str, tuple[Sequence[Column], Diffs]], epoch: int) -> None:
        """Set base relations to `contents` (rows and multiplicities) at `epoch`, which
        becomes the current epoch: a snapshot restored before any dataflow starts.
        Earlier epochs are not readable any more (the snapshot has no history)."""
        assert not self.dataflows, "load before any dataflow starts"
        for name, (columns, counts) in contents.items():
            updates = Updates(tuple(columns), column((epoch,), len(counts)), counts)
            self.inputs[name].stage(updates, epoch)
        self.epoch = max(epoch, self.epoch)
        self.floor = self.epoch
        for inp in self.inputs.values():
            inp.seal(self.epoch + 1)
        self._keep_history()

    def stats(self) -> dict[str, object]:
        self.finish_retiring()
        return {
            "epoch": self.epoch,
            "history": {"epochs": self.history, "oldest_readable": self.oldest_readable()},
            "inputs": {name: inp.stats() for name, inp in self.inputs.items()},
            "dataflows": [
                {
                    "name": df.name,
                    "operators": len(df.root.all_operators()),
                    "arrangements": df.arrangements(),
                }
                for df in self.dataflows
            ],
            "views": {
                view.input.name: {
                    "tuples": view.input.size,
                    "readers": self._readers(view),
                    "computed with": [v.input.name for v in self.group(view) if v is not view],
                    "operators": len(view.dataflow.root.all_operators()),
                    "arrangements": view.dataflow.arrangements(),
                }
                for view in self.views
            },
        }
