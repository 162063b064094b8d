"""Shared helpers for the differential tests: requests, captured outputs, dataflows.

The dataflow builders here are the reference shapes the oracle and invariant tests
run (join, antijoin, the reduce family, reachability, connected components); each
returns the `Output` whose listener an `Accumulated` is attached to.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence

import numpy as np

from differential.batch import Updates
from differential.engine import Engine
from differential.graph import Dataflow, Output
from differential.inputs import Requests
from differential.operators.arrange import ArrangeOp
from differential.operators.enter import AsCollection, EnterArranged
from differential.operators.iterate import Subscope, Variable
from differential.operators.join import JoinOp
from differential.operators.linear import concat, enter, leave, map_columns, negate, project
from differential.operators.reduce import ReduceOp, Reducer, distinct, minimum

I64 = np.dtype(np.int64)
Row = tuple[int, ...]
Op = tuple[bool, Row]  # (inserting, row)


def requests(ops: Sequence[Op], arity: int) -> Requests:
    """`Requests` for `ops` in order (int64 columns)."""
    cols = tuple(np.array([row[i] for _, row in ops], dtype=np.int64) for i in range(arity))
    return Requests(cols, np.array([ins for ins, _ in ops], dtype=bool))


def counter(updates: Updates) -> Counter[Row]:
    """The rows of `updates` with their summed diffs (times ignored), zeros dropped."""
    out: Counter[Row] = Counter()
    for row in updates.rows():
        out[tuple(row[:-2])] += row[-1]  # type: ignore[arg-type, operator]
    return Counter({k: v for k, v in out.items() if v})


class Accumulated:
    """A listener that sums every delivered change; checks each epoch's times."""

    def __init__(self, output: Output) -> None:
        self.state: Counter[Row] = Counter()
        self.epochs: list[int] = []
        output.listeners.append(self)

    def __call__(self, updates: Updates, epoch: int) -> None:
        assert np.all(updates.times == epoch), f"changes of epoch {epoch} at other times"
        self.epochs.append(epoch)
        for row, diff in counter(updates).items():
            self.state[row] += diff
            if self.state[row] == 0:
                del self.state[row]

    def rows(self) -> dict[Row, int]:
        return dict(self.state)


def collection(df: Dataflow, name: str, arity: int) -> AsCollection:
    """The whole relation `name` as a stream (arranged by all its columns)."""
    return AsCollection(df.import_input(name, list(range(arity)), arity))


# -- dataflow shapes ---------------------------------------------------------------

Builder = Callable[[Dataflow], Output]


def build_join(df: Dataflow) -> Output:
    """`a(x, y) ⋈ b(x, z)` as rows `(x, y, z)`."""
    a = df.import_input("a", [0, 1], 1)
    b = df.import_input("b", [0, 1], 1)
    return df.capture(JoinOp(a, b, [0, 1, 2]).output, "join")


def build_antijoin(df: Dataflow) -> Output:
    """`a(x, y)` whose `x` is no key of `b`: `a - (a ⋉ distinct(keys of b))`."""
    a = df.import_input("a", [0, 1], 1)
    b_keys = project(collection(df, "b", 2).output, [0])
    keys = ReduceOp(ArrangeOp(b_keys, 1), distinct, [], "distinct")
    semijoin = JoinOp(a, ArrangeOp(keys.output, 1), [0, 1]).output
    return df.capture(concat([AsCollection(a).output, negate(semijoin)]), "antijoin")


def build_reduce(reducer: Reducer, out_dtypes: Sequence[np.dtype]) -> Builder:
    """`reducer` over `(x, y % 3)` of `a` keyed by `x` (a multiset: duplicates occur)."""

    def build(df: Dataflow) -> Output:
        a = collection(df, "a", 2).output
        folded = map_columns(a, lambda c: [c[0], c[1] % 3], [I64, I64])
        red = ReduceOp(ArrangeOp(folded, 1), reducer, out_dtypes, "reduce")
        return df.capture(red.output, "reduce")

    return build


def build_reach(df: Dataflow) -> Output:
    """Nodes reachable from `root(x)` along `edge(x, y)`."""
    edges = df.import_input("edge", [0, 1], 1)
    roots = collection(df, "root", 1).output
    sub = Subscope(df.root)
    inner = sub.inner
    var = Variable(inner, [I64], "reach")
    step = JoinOp(ArrangeOp(var.output, 1), EnterArranged(inner, edges), [1]).output
    dist = ReduceOp(ArrangeOp(concat([enter(roots, inner), step]), 1), distinct, [], "distinct")
    var.set(dist.output)
    return df.capture(leave(dist.output), "reach")


def build_components(df: Dataflow) -> Output:
    """`(x, least node connected to x)` over the undirected graph of `edge`."""
    e = collection(df, "edge", 2).output
    both = concat([e, project(e, [1, 0])])
    adjacency = ArrangeOp(both, 1)
    nodes = project(both, [0, 0])
    sub = Subscope(df.root)
    inner = sub.inner
    labels = Variable(inner, [I64, I64], "label")
    proposals = JoinOp(ArrangeOp(labels.output, 1), EnterArranged(inner, adjacency), [2, 1])
    candidates = concat([enter(nodes, inner), proposals.output])
    least = ReduceOp(ArrangeOp(candidates, 1), minimum, [I64], "minimum")
    labels.set(least.output)
    return df.capture(leave(least.output), "components")


# -- references --------------------------------------------------------------------


def reach_reference(edges: set[Row], roots: set[Row]) -> dict[Row, int]:
    seen = {r[0] for r in roots}
    frontier = list(seen)
    adjacency: dict[int, list[int]] = {}
    for x, y in edges:
        adjacency.setdefault(x, []).append(y)
    while frontier:
        x = frontier.pop()
        for y in adjacency.get(x, []):
            if y not in seen:
                seen.add(y)
                frontier.append(y)
    return {(x,): 1 for x in seen}


def components_reference(edges: set[Row]) -> dict[Row, int]:
    parent: dict[int, int] = {}

    def find(x: int) -> int:
        while parent.setdefault(x, x) != x:
            x = parent[x]
        return x

    for a, b in edges:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    return {(x, find(x)): 1 for x in list(parent)}


class SetModel:
    """Set-semantics inputs as Python sets (the last request on a row decides)."""

    def __init__(self, names: Sequence[str]) -> None:
        self.relations: dict[str, set[Row]] = {n: set() for n in names}

    def apply(self, name: str, ops: Sequence[Op]) -> None:
        rel = self.relations[name]
        for inserting, row in ops:
            if inserting:
                rel.add(row)
            else:
                rel.discard(row)


def new_engine(inputs: dict[str, int]) -> Engine:
    eng = Engine()
    for name, arity in inputs.items():
        eng.create_input(name, [I64] * arity)
    return eng


def build_parity(df: Dataflow) -> Output:
    """Mutual recursion: `(y, p)` where some walk from a root reaches `y` in steps of parity `p`.

    even(y) :- root(y).  odd(y) :- even(x), edge(x, y).  even(y) :- odd(x), edge(x, y).
    """
    edges = df.import_input("edge", [0, 1], 1)
    roots = collection(df, "root", 1).output
    inner = Subscope(df.root).inner
    e_in = EnterArranged(inner, edges)
    even, odd = Variable(inner, [I64], "even"), Variable(inner, [I64], "odd")
    from_odd = JoinOp(ArrangeOp(odd.output, 1), e_in, [1]).output
    from_even = JoinOp(ArrangeOp(even.output, 1), e_in, [1]).output
    even_d = ReduceOp(ArrangeOp(concat([enter(roots, inner), from_odd]), 1), distinct, [], "even")
    odd_d = ReduceOp(ArrangeOp(from_even, 1), distinct, [], "odd")
    even.set(even_d.output)
    odd.set(odd_d.output)
    tagged = concat(
        [
            map_columns(leave(even_d.output), lambda c: [c[0], c[0] * 0], [I64, I64]),
            map_columns(leave(odd_d.output), lambda c: [c[0], c[0] * 0 + 1], [I64, I64]),
        ]
    )
    return df.capture(tagged, "parity")


def parity_reference(edges: set[Row], roots: set[Row]) -> dict[Row, int]:
    seen = {(r[0], 0) for r in roots}
    frontier = list(seen)
    while frontier:
        x, p = frontier.pop()
        for a, b in edges:
            if a == x and (b, 1 - p) not in seen:
                seen.add((b, 1 - p))
                frontier.append((b, 1 - p))
    return dict.fromkeys(seen, 1)


def build_nested_reach(df: Dataflow) -> Output:
    """Reachability computed two scopes down (times `(epoch, i, j)`), passed out unchanged."""
    edges = df.import_input("edge", [0, 1], 1)
    roots = collection(df, "root", 1).output
    outer = Subscope(df.root).inner
    inner = Subscope(outer).inner
    e_in = EnterArranged(inner, EnterArranged(outer, edges))
    var = Variable(inner, [I64], "reach")
    step = JoinOp(ArrangeOp(var.output, 1), e_in, [1]).output
    start = enter(enter(roots, outer), inner)
    dist = ReduceOp(ArrangeOp(concat([start, step]), 1), distinct, [], "distinct")
    var.set(dist.output)
    return df.capture(leave(leave(dist.output)), "reach")
