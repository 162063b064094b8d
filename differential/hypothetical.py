"""A hypothetical epoch: what the dataflows would output if these requests committed,
with nothing left changed (docs/adr/0052).

Layer: differential. Imports `differential.engine` and `differential.savepoint`.

`outputs(engine, requests)` stages the requests as the next epoch would, runs the
views and the dataflows they reach, in the order `Engine.commit` runs them, drains
the outputs of those dataflows, and restores every object the run could change
(a `Savepoint` taken before it) whatever happens: the epoch does not advance,
nothing is sealed, no listener is called, and no other dataflow runs (one that
reads nothing the requests reach has no work at the next epoch: it would output
nothing). A dataflow that reads a late input (the engine's own description) is
not covered: its input's changes are computed from the engine after the epoch;
`covers` says whether an engine is in that case.
"""

from __future__ import annotations

from collections.abc import Mapping

from differential.batch import Updates
from differential.engine import Engine
from differential.graph import Dataflow, Output, View
from differential.inputs import Requests
from differential.savepoint import Savepoint


def covers(engine: Engine) -> bool:
    """Whether `outputs` can answer for this engine (no live dataflow reads a late input)."""
    return not engine.reads_late


def reached(engine: Engine, names: set[str]) -> tuple[list[View], list[Dataflow], set[str]]:
    """The views and dataflows that read the inputs `names` (or a view that does), in
    the order a commit runs them, and every input they read or write."""
    owner = {id(a): name for name, inp in engine.inputs.items() for a in inp.arrangements.values()}

    def imported(df: Dataflow) -> set[str]:
        return {owner[id(op.shared)] for op in df.imports if id(op.shared) in owner}

    touched, read = set(names), set(names)
    views: list[View] = []
    for view in engine.views:
        if imported(view.dataflow) & touched:
            views.append(view)
            touched.add(view.input.name)
            read |= imported(view.dataflow)
    flows = [df for df in engine.dataflows if imported(df) & touched]
    for df in flows:
        read |= imported(df)
    return views, flows, read | touched


def outputs(engine: Engine, requests: Mapping[str, Requests]) -> list[tuple[Output, Updates]]:
    """What each output of a dataflow the requests reach would hand its listeners if
    they committed as the next epoch (module docstring); the engine is left exactly
    as it was. If restoring fails (an interrupt inside it), the dataflows it ran are
    dropped, as an aborted commit drops them, before the failure propagates."""
    assert covers(engine), "a dataflow reads a late input"
    engine.finish_retiring()
    epoch = engine.epoch + 1
    views, flows, names = reached(engine, {n for n, r in requests.items() if len(r)})
    inputs = [engine.inputs[n] for n in sorted(names)]
    settle([*flows, *(v.dataflow for v in views)])
    savepoint = Savepoint([*inputs, *views, *flows], stops=[engine])
    try:
        staged = {name: engine.inputs[name].diffs(req, epoch) for name, req in requests.items()}
        for name, diffs in staged.items():
            engine.inputs[name].stage(diffs, epoch)
        engine.run_views(views, epoch)
        for df in flows:
            df.run()
        return [(out, out.capture.drain()) for df in flows for out in df.outputs.values()]
    finally:
        try:
            savepoint.restore()
        except BaseException:
            for df in [*flows, *(v.dataflow for v in views)]:
                engine.drop(df)
            for source in inputs:
                source.unstage()
            raise


def settle(flows: list[Dataflow]) -> None:
    """Arrange what the arrangements of `flows` defer until read (`ArrangeOp.settle`,
    `ReduceOp.settle`):
    the first reader would, and a hypothetical whose state is restored would do it
    again at every call (a dataflow just started defers its whole first epoch)."""
    for df in flows:
        df.settle()
