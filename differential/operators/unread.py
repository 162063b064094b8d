"""Join sides nobody reads again: arrangements of a one-shot round that keep nothing.

Layer: differential (operators). Imports `dataflow`, the arrange, join and linear
operators.

A join `A ⋈ B` at time `t` reads A's trace only to meet B's changes at `t`. In a
totally ordered iteration scope (a one-shot dataflow's rounds `(e, i)`, ADR 0062) a
collection that no variable reaches (a relation of a lower stratum, entered, or
computed from entered ones) changes at the scope's first round `(e, 0)` only, when
A's history before it is empty. So an arrangement whose every reader is such a join,
with a side that no variable reaches, is never looked up after that round: its
rounds' updates need not be kept (`ArrangeOp.keep_nothing`), nor sorted, merged or
counted. In a recursion like `r(x, z) :- r(y, z), e(x, y), !n(y).` that is the
recursive relation arranged for the join with `e` and for the antijoin's match with
`n`, each holding every derived row, and sorting them round after round.

Which collections a variable reaches is followed forward from the scope's variables
(`Scope.variables`): through maps, concatenations, arrangements and every operator
reading a reached arrangement. A receiver of unknown kind on the way (a stream
entered into a deeper scope, a capture) gives up: nothing is marked.
`Tuning.unread_sides` False is the reference (every arrangement keeps its rounds).
"""

from __future__ import annotations

from differential.dataflow import Operator, Receiver, Scope, Stream
from differential.operators.arrange import ArrangeOp
from differential.operators.join import JoinOp
from differential.operators.linear import Edge
from differential.tuning import TUNING


def mark_unread(scope: Scope) -> list[ArrangeOp]:
    """Let the arrangements of `scope` that no reader looks up after its first round
    keep nothing (`ArrangeOp.keep_nothing`); the ones marked."""
    if not TUNING.unread_sides or not scope.totally_ordered or scope.parent is None:
        return []
    readers = scope.readers()  # (a deeper scope may enter an arrangement of this one)
    moving = _reached(scope, readers)
    if moving is None:
        return []
    marked = []
    for op in scope.operators:
        if not isinstance(op, ArrangeOp) or id(op) not in moving:
            continue
        joins = readers.get(id(op), [])
        if joins and all(_static_other_side(j, op, moving) for j in joins):
            op.keep_nothing()
            marked.append(op)
    return marked


def _static_other_side(reader: Operator, arranged: ArrangeOp, moving: set[int]) -> bool:
    """Whether `reader` is a join of `arranged` with a side no variable reaches."""
    if not isinstance(reader, JoinOp) or reader.scope is not arranged.scope:
        return False
    other = reader.right if reader.left is arranged else reader.left
    return other is not arranged and id(other) not in moving


def _reached(scope: Scope, readers: dict[int, list[Operator]]) -> set[int] | None:
    """The ids of the operators (and streams) that the scope's variables reach (None: a
    receiver on the way is of a kind not followed)."""
    arranges: dict[Receiver, ArrangeOp] = {
        op.receiver: op for op in scope.all_operators() if isinstance(op, ArrangeOp)
    }
    reached: set[int] = set()
    streams: list[Stream] = list(scope.variables)
    ops: list[Operator] = []
    while streams or ops:
        while ops:
            op = ops.pop()
            if id(op) in reached:
                continue
            reached.add(id(op))
            ops.extend(readers.get(id(op), []))
            output = getattr(op, "output", None)
            if isinstance(output, Stream):
                streams.append(output)
        if not streams:
            break
        stream = streams.pop()
        if id(stream) in reached or stream.scope.depth < scope.depth:  # (left the scope)
            continue
        reached.add(id(stream))
        for receiver in stream.receivers:
            if isinstance(receiver, Edge):
                streams.append(receiver.out)
                continue
            owner = getattr(receiver, "__self__", None)  # `concat` connects `Stream.send`
            if isinstance(owner, Stream) and receiver == owner.send:
                streams.append(owner)
                continue
            arrange = arranges.get(receiver)
            if arrange is None:
                return None
            ops.append(arrange)
    return reached
