"""GenericJoin's extension of prefixes by one variable, written once for every tactic.

Layer: joins. Imports `differential` only.

dogsdogsdogs has one `PrefixExtender` trait and one `extend` algorithm; so do we.
`extend` binds one more variable: every proposer counts, per prefix, the values it
would propose; the fewest proposes; every other proposer, and every check now
bound (a negation), validates the proposals; the survivors extend their prefixes.
It runs over chunks of about `TUNING.proposals` candidates (the budget checked
between two; the scheduler checks it between steps) and, under a row limit,
refuses a product that grows too large.

The extenders and the `Shape` (how prefixes and proposals are held, and the few
operations on them the algorithm needs) come from a tactic:

- columns (`joins.extenders`, `ColumnShape`): `Prefixes` and `Proposals` of numpy
  columns, the reference;
- rows (`joins.few`, `RowShape`): Python lists, for a few changes, where the fixed
  cost of a numpy call is the whole cost. Its extenders raise `few.Refused` when a
  lookup finds too many entries, and the caller runs the columns tactic instead.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence, Sized
from typing import Generic, Protocol, TypeVar

from differential.dataflow import check_budget, check_rows, row_limit
from differential.time import Time

P = TypeVar("P")  # prefixes
C = TypeVar("C", bound=Sized)  # proposals (candidates)
K = TypeVar("K")  # per-prefix counts
R = TypeVar("R", bound=Sized)  # a selection of prefix rows
P_in = TypeVar("P_in", contravariant=True)
C_in = TypeVar("C_in", bound=Sized, contravariant=True)
K_out = TypeVar("K_out", covariant=True)
R_in = TypeVar("R_in", bound=Sized, contravariant=True)


class Extender(Protocol, Generic[P_in, C, K_out, R_in]):
    """GenericJoin's three steps, over a batch of prefixes, for one variable."""

    def count(self, prefixes: P_in, time: Time) -> K_out:
        """How many values each prefix would be proposed (`NEVER`: it cannot propose)."""
        ...

    def propose(self, prefixes: P_in, rows: R_in, time: Time) -> C:
        """The values for the prefix rows `rows` (those this extender counted fewest)."""
        ...

    def validate(self, prefixes: P_in, proposals: C, time: Time) -> C:
        """The proposals this binding agrees with, their multiplicities and times met."""
        ...


class Validator(Protocol, Generic[P_in, C]):
    """A binding that only validates proposals (a negation)."""

    def validate(self, prefixes: P_in, proposals: C, time: Time) -> C: ...


class Shape(Protocol, Generic[P, C_in, K, R]):
    """How a tactic holds prefixes (`P`), proposals (`C`), counts (`K`) and selections
    of prefix rows (`R`), and the operations `extend` needs on them (proposals and
    selections also have a length)."""

    def size(self, prefixes: P) -> int:
        """How many prefixes."""
        ...

    def fewest(self, counts: Sequence[K]) -> tuple[list[int] | R, K]:
        """Per prefix, the index of the extender with the fewest values, and that count."""
        ...

    def total(self, sizes: K) -> int:
        """The sum of the counts."""
        ...

    def chunks(self, n: int, sizes: K | None) -> Iterable[R]:
        """Runs of the prefix rows, about `TUNING.proposals` candidates each."""
        ...

    def won(self, rows: R, winner: list[int] | R | None, w: int) -> R:
        """The rows of `rows` whose fewest extender is `w` (all when `winner` is None)."""
        ...

    def extended(self, prefixes: P, proposals: C_in, var: str) -> P:
        """The prefixes of the proposals, each extended by its value as `var`."""
        ...

    def gathered(self, prefixes: P, var: str, parts: list[P]) -> P:
        """The parts as one batch of prefixes over the variables and `var`."""
        ...


def extend(
    shape: Shape[P, C, K, R],
    prefixes: P,
    var: str,
    proposers: Sequence[Extender[P, C, K, R]],
    checks: Sequence[Validator[P, C]],
    time: Time,
) -> P:
    """Bind `var`: the smallest count proposes, the other proposers and the `checks`
    validate the candidates, survivors are gathered into one batch of prefixes."""
    return shape.gathered(
        prefixes, var, list(extend_parts(shape, prefixes, var, proposers, checks, time))
    )


def extend_parts(
    shape: Shape[P, C, K, R],
    prefixes: P,
    var: str,
    proposers: Sequence[Extender[P, C, K, R]],
    checks: Sequence[Validator[P, C]],
    time: Time,
) -> Iterator[P]:
    """`extend`, its survivors yielded chunk by chunk as they are found, so that a
    caller may carry each part on before the next is proposed (memory bounded by a
    chunk, whatever the product).

    Under a row limit, an extension whose candidates all survive (one proposer, no
    check) is refused before any is proposed if they are too many; any other once
    its survivors so far are."""
    limited = row_limit() is not None
    winner: list[int] | R | None = None
    sizes: K | None = None
    if len(proposers) > 1 or limited:  # else nothing to choose between: no counts
        winner, sizes = shape.fewest([e.count(prefixes, time) for e in proposers])
        if len(proposers) == 1 and not checks:
            check_rows(shape.total(sizes), "a join (delta query)")
    built = 0
    for chunk, rows in enumerate(shape.chunks(shape.size(prefixes), sizes)):
        if chunk:  # a huge extension stops between two chunks when time is up
            check_budget()
        for w, proposer in enumerate(proposers):
            mine = shape.won(rows, winner, w)
            if not len(mine):
                continue
            proposed = proposer.propose(prefixes, mine, time)
            for other in [*[e for o, e in enumerate(proposers) if o != w], *checks]:
                if len(proposed):
                    proposed = other.validate(prefixes, proposed, time)
            if len(proposed):
                built += len(proposed)
                extended = shape.extended(prefixes, proposed, var)
                del proposed  # (neither held while the caller carries it on, nor while
                yield extended  # the next chunk is proposed: one chunk in memory)
                del extended
        if limited:
            check_rows(built, "a join (delta query)", at_least=True)
