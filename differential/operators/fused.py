"""A recursive relation as fused rounds see it: a growing distinct and its input.

Layer: differential (operators). Imports `small`, `time`, the arrange, reduce,
linear and join-stage operators.

Fused rounds (`chain` in a first epoch, `later_rounds` after it) do a scope's
few-row rounds on Python rows and hand the result to the operators as their own
steps would have left it. They drive the operators only through their public
protocols (ADR 0050):

- the distinct's input arrangement (`ArrangeOp`): `waiting_only`, `take_waiting`,
  `enqueue`, `receiver`, `seal`, `defer`, `history_before`, `entries_of`;
- the distinct (`ReduceOp`): `growing_at`, `holds`, `grown`, `stop_growing`,
  `first_scheduled`, `output_entries`, `record`.

`Relation` bundles the two with the ways the relation's rows reach the inputs of
the scope's relations; both kinds of rounds read it, and neither imports the other's
state.
"""

from __future__ import annotations

from differential import small
from differential.operators.arrange import ArrangeOp
from differential.operators.chain_joins import JoinStage
from differential.operators.linear import Edge, RowMap
from differential.operators.reduce import ReduceOp
from differential.time import Time

Stage = RowMap | JoinStage
Path = list[Stage]  # the row forms along one way from a variable to a distinct


class Relation:
    """A recursive relation of the scope: its distinct, the arrangement of the
    distinct's input, and the ways its variable's rows reach the relations' inputs
    (each a path and the index of the relation it ends at)."""

    def __init__(self, reduce: ReduceOp, arrange: ArrangeOp, leaves: list[Edge]) -> None:
        self.reduce = reduce
        self.arrange = arrange
        self.leaves = leaves
        self.paths: list[tuple[Path, int]] = []
        self.hash_of = small.row_hash(arrange.key_arity == 1, arrange.dtypes[0].kind == "i")

    def growing_at(self, time: Time) -> bool:
        """Whether the distinct may take the growing step at `time` and later (its
        other conditions, positive diffs, are the rows')."""
        if not self.reduce.growing_at(time):
            return False
        self.arrange.seal()
        return self.arrange.history_before(time)
