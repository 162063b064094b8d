"""Relations as collections and arrangements, per scope of a dataflow.

Layer: datalog (planner). Imports `differential`.

In the root scope a base relation (no rules) is read from the engine's shared
arrangements: one import per (column order, key) that some plan needs, shared
with every other dataflow. A derived relation is the stream its stratum
computes, arranged privately on demand, unless it is read from a view (`views`:
the engine input a shared dataflow computes it into), which is then read like a
base relation. Inside an iteration scope, relations
of the stratum being iterated are its variables; every other relation enters
from the parent scope (arrangements enter without being rebuilt).
"""

from __future__ import annotations

from collections.abc import Sequence

from datalog.lang.schema import Schema
from datalog.plan.plan import SharedRead
from differential.dataflow import Scope, Stream
from differential.graph import Dataflow
from differential.operators.arrange import Arranged, ArrangeOp
from differential.operators.enter import AsCollection, EnterArranged
from differential.operators.linear import enter, project

ArrangementKey = tuple[str, tuple[int, ...], int]


class Sources:
    """Where each relation's collection and arrangements come from in one scope."""

    def __init__(
        self, dataflow: Dataflow, scope: Scope, schema: Schema, parent: Sources | None = None
    ) -> None:
        self.dataflow = dataflow
        self.schema = schema
        self.scope = scope
        self.parent = parent
        self.streams: dict[str, Stream] = {}
        self.derived: set[str] = set()
        self.inputs: dict[str, Stream] = {}
        self.arranged: dict[ArrangementKey, Arranged] = {}
        self.shared: list[SharedRead] = []  # the shared arrangements read here
        self.views: dict[str, str] = {}  # derived relation -> the view input read for it

    def define(self, relation: str, stream: Stream) -> None:
        """`relation` is computed by `stream` in this scope."""
        assert stream.scope is self.scope
        self.streams[relation] = stream
        self.derived.add(relation)

    def collection(self, relation: str) -> Stream:
        found = self.streams.get(relation)
        if found is not None:
            return found
        if self.parent is not None:
            stream = enter(self.parent.collection(relation), self.scope)
        else:
            stream = self.input_collection(self.source_of(relation))
            if relation in self.views:
                self.shared.append(SharedRead(relation, self.views[relation]))
        self.streams[relation] = stream
        return stream

    def arrangement(self, relation: str, permutation: Sequence[int], key_arity: int) -> Arranged:
        """`relation`'s columns in `permutation` order, keyed by the first `key_arity`."""
        key = (relation, tuple(permutation), key_arity)
        found = self.arranged.get(key)
        if found is not None:
            return found
        if relation in self.derived:
            made: Arranged = ArrangeOp(project(self.streams[relation], key[1]), key_arity)
        elif self.parent is not None:
            made = EnterArranged(self.scope, self.parent.arrangement(*key))
        else:
            made = self.dataflow.import_input(self.source_of(relation), key[1], key_arity)
            view = self.views.get(relation, "")
            self.shared.append(SharedRead(relation, view, key[1][:key_arity]))
        self.arranged[key] = made
        return made

    def input_collection(self, relation: str) -> Stream:
        """The facts inserted into `relation` by transactions (not what rules derive)."""
        found = self.inputs.get(relation)
        if found is not None:
            return found
        if self.parent is not None:
            found = enter(self.parent.input_collection(relation), self.scope)
        else:
            arity = len(self.dataflow.inputs[relation].dtypes)
            identity = tuple(range(arity))
            found = AsCollection(self.dataflow.import_input(relation, identity, arity)).output
        self.inputs[relation] = found
        return found

    def size(self, relation: str) -> int:
        """Tuples in `relation`'s input (or view) now: a live statistic for join ordering."""
        found = self.dataflow.inputs.get(self.source_of(relation))
        return len(found.presence) if found is not None else 0

    def source_of(self, relation: str) -> str:
        """The engine input `relation` is read from in the root scope."""
        if self.parent is not None:
            return self.parent.source_of(relation)
        return self.views.get(relation, relation)

    def is_base(self, relation: str) -> bool:
        """Read straight from the engine's input (no rules computing it here or above)."""
        if relation in self.derived:
            return False
        return self.parent.is_base(relation) if self.parent is not None else True
