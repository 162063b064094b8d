"""Dataflow graphs as the engine runs them: a root scope, its outputs, the input
arrangements it imports, and views (inputs a dataflow computes).

Layer: differential. Imports the operators and `differential.dataflow`; the engine
(`differential.engine`) builds, runs and drops these.

A dataflow knows nothing of the engine that owns it: it is given the epoch it starts
at, the inputs it may import, and the clock that times its work (`spent`, ADR 0064).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field

from differential.batch import Updates
from differential.dataflow import Scope, Stream
from differential.inputs import Input
from differential.operators.arrange import ArrangeOp
from differential.operators.capture import Capture
from differential.operators.reduce import ReduceOp
from differential.operators.shared import ImportOp

Listener = Callable[[Updates, int], None]


@dataclass
class Output:
    """A captured root-scope stream and who listens to it."""

    capture: Capture
    listeners: list[Listener] = field(default_factory=list)


class Dataflow:
    """One dataflow graph: a root scope (time `(epoch,)`) and its outputs."""

    def __init__(
        self, name: str, start: int, inputs: Mapping[str, Input], clock: Callable[[], float]
    ) -> None:
        self.name = name
        self.root = Scope(1, None, name)
        self.start = start  # the epoch of its snapshot
        self.inputs = inputs  # what it may import, by name
        self.clock = clock  # times its work (`spent`)
        self.imports: list[ImportOp] = []
        self.outputs: dict[str, Output] = {}
        self.late = False  # reads a late input: runs each epoch after the others
        self.spent = 0.0  # seconds (its `clock`) it ran, settled and advanced: ADR 0064

    def import_input(self, name: str, permutation: Sequence[int], key_arity: int) -> ImportOp:
        """The shared arrangement of input `name` (columns permuted), read here."""
        source = self.inputs[name]
        op = ImportOp(self.root, source.arrangement(permutation, key_arity), self.start)
        self.imports.append(op)
        self.late |= source.late
        return op

    def capture(self, stream: Stream, name: str) -> Output:
        out = Output(Capture(stream))
        self.outputs[name] = out
        return out

    def run(self) -> None:
        began = self.clock()
        self.root.run(())
        self.spent += self.clock() - began

    def settle(self) -> None:
        """Arrange what the arrangements defer until read (`ArrangeOp.settle`,
        `ReduceOp.settle`): a live dataflow's first commit would, all at once, so a
        query that lives on settles when it starts (ADR 0057); a one-shot dataflow
        never reads what it deferred."""
        began = self.clock()
        for op in self.root.all_operators():
            if isinstance(op, (ArrangeOp, ReduceOp)):
                op.settle()
        self.spent += self.clock() - began

    def drop_operators(self) -> None:
        """Forget every operator but the outputs' captures, and what each holds: a
        dataflow that runs once frees its arrangements before its answer is
        consolidated (ADR 0062). Imports stay (`release` lets go of them)."""
        self.root.forget({id(op) for op in self.imports})
        for out in self.outputs.values():  # its links upstream are for explaining only
            out.capture.stream.upstream, out.capture.stream.producer = (), None

    def deliver(self, epoch: int) -> None:
        for out in self.outputs.values():
            changes = out.capture.drain()
            for listen in out.listeners:
                listen(changes, epoch)

    def advance(self, next_epoch: int) -> None:
        began = self.clock()
        for op in self.root.all_operators():
            op.advance(next_epoch)
        self.spent += self.clock() - began

    def release(self) -> None:
        for op in self.imports:
            op.release()
        self.imports = []

    def describe(self) -> list[str]:
        """The operators as built, one a line, scopes indented (what runs, as built)."""
        return self.root.describe()

    def arrangements(self) -> list[tuple[str, int, int]]:
        """`(operator, tuples, batches)` for every non-empty arrangement this dataflow owns."""
        return [(name, tuples, batches) for _, name, tuples, batches in self.traces() if tuples]

    def traces(self) -> list[tuple[int, str, int, int]]:
        """`(operator index, operator, updates, batches)` for every arrangement this
        dataflow owns, empty or not; measuring changes nothing."""
        return [
            (i, op.describe(), *op.arranged_size())
            for i, op in enumerate(self.root.all_operators())
            if op.holds_trace
        ]


@dataclass(eq=False)
class View:
    """An input whose contents `dataflow` computes (its `output`), under `key`."""

    key: Hashable
    input: Input
    dataflow: Dataflow
    output: Output
    notes: Sequence[str] = ()  # how its creator planned it (for explanations)

    @property
    def read(self) -> bool:
        """Whether a dataflow reads the view (holds a handle on one of its arrangements)."""
        return any(a.readers for a in self.input.arrangements.values())

    def stage(self, epoch: int) -> None:
        """Make what the dataflow computed this epoch the input's batch of `epoch`."""
        changes = self.output.capture.drain()
        if len(changes):
            self.input.stage(changes, epoch)
