"""Variable orders for delta-query pipelines (joins/order.py).

An order is suitable when every next variable is constrained by a binary
binding (other than the source) whose other variable is already bound; there
is none exactly when some variable is unreachable from the source's variables
through binary bindings. Among candidates, the order prefers the variable
constrained by more bindings, then the one whose smallest constraining
relation is smallest, then body order.
"""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import given
from hypothesis import strategies as st

from joins.order import constraining, variable_order

Patterns = list[tuple[str, ...]]

TRIANGLE: Patterns = [("a", "b"), ("b", "c"), ("a", "c")]


def test_triangle_pipelines_bind_the_third_variable() -> None:
    sizes = [10, 10, 10]
    assert variable_order(TRIANGLE, 0, sizes) == ["c"]
    assert variable_order(TRIANGLE, 1, sizes) == ["a"]
    assert variable_order(TRIANGLE, 2, sizes) == ["b"]


def test_a_path_is_extended_outwards_from_the_source() -> None:
    path: Patterns = [("a", "b"), ("b", "c"), ("c", "d")]
    assert variable_order(path, 0, [1, 1, 1]) == ["c", "d"]
    assert variable_order(path, 2, [1, 1, 1]) == ["b", "a"]
    # From the middle, both ends are candidates: body order breaks the tie.
    assert variable_order(path, 1, [1, 1, 1]) == ["a", "d"]


def test_source_conflicts_leave_nothing_to_bind() -> None:
    assert variable_order([("a", "b"), ("b", "a")], 0, [5, 5]) == []
    assert variable_order([("a", "b"), ("a", "b"), ("a",)], 2, [5, 5, 1]) == ["b"]


def test_disconnected_bindings_have_no_order() -> None:
    assert variable_order([("a", "b"), ("c", "d")], 0, [1, 1]) is None
    # A unary binding never binds a variable on its own.
    assert variable_order([("a", "b"), ("c",)], 0, [1, 1]) is None
    assert variable_order([("c",), ("a", "b")], 0, [1, 1]) is None


def test_a_unary_source_extends_through_binary_bindings() -> None:
    assert variable_order([("a",), ("a", "b"), ("b", "c")], 0, [1, 1, 1]) == ["b", "c"]


def test_the_source_binding_never_constrains_its_own_pipeline() -> None:
    # From (b, a) only the source mentions a and b together; c is bound via (b, c).
    assert variable_order([("b", "c"), ("a", "b")], 1, [1, 1]) == ["c"]


def test_more_constraining_bindings_win_over_smaller_relations() -> None:
    # c is constrained by two bindings (a, c) and (b, c); d by one tiny one.
    patterns: Patterns = [("a", "b"), ("b", "d"), ("a", "c"), ("b", "c")]
    assert variable_order(patterns, 0, [100, 1, 100, 100]) == ["c", "d"]


def test_among_equally_constrained_variables_the_smaller_relation_wins() -> None:
    star: Patterns = [("a", "b"), ("a", "c"), ("a", "d")]
    assert variable_order(star, 0, [9, 100, 5]) == ["d", "c"]
    assert variable_order(star, 0, [9, 5, 100]) == ["c", "d"]
    # Ties on count and size fall back to body order.
    assert variable_order(star, 0, [9, 7, 7]) == ["c", "d"]


def test_the_smallest_constraining_relation_decides_the_size() -> None:
    # x is constrained by (a, x) size 50 and (b, x) size 2; y by (a, y), (b, y) both 10.
    patterns: Patterns = [("a", "b"), ("a", "y"), ("b", "y"), ("a", "x"), ("b", "x")]
    assert variable_order(patterns, 0, [1, 10, 10, 50, 2]) == ["x", "y"]


def test_constraining_lists_binary_bindings_whose_other_side_is_bound() -> None:
    patterns: Patterns = [("a", "b"), ("b", "c"), ("c",), ("a", "c"), ("c", "d")]
    assert constraining(patterns, "c", {"a", "b"}) == [1, 3]
    assert constraining(patterns, "c", {"a"}) == [3]
    assert constraining(patterns, "d", {"a", "b"}) == []


# -- properties over random binding sets ---------------------------------------------

VARS = "abcdef"


@st.composite
def binding_sets(draw: st.DrawFn) -> tuple[Patterns, int, list[int]]:
    binary = st.tuples(st.sampled_from(VARS), st.sampled_from(VARS)).filter(lambda p: p[0] != p[1])
    unary = st.tuples(st.sampled_from(VARS))
    patterns: Patterns = draw(st.lists(st.one_of(binary, binary, unary), min_size=1, max_size=7))
    source = draw(st.integers(0, len(patterns) - 1))
    sizes = draw(st.lists(st.integers(0, 50), min_size=len(patterns), max_size=len(patterns)))
    return patterns, source, sizes


def reachable(patterns: Sequence[tuple[str, ...]], source: int) -> set[str]:
    seen = set(patterns[source])
    changed = True
    while changed:
        changed = False
        for p in patterns:
            if len(p) == 2 and (p[0] in seen) != (p[1] in seen):
                seen.update(p)
                changed = True
    return seen


@given(binding_sets())
def test_orders_are_suitable_and_exist_exactly_when_bindings_connect(
    case: tuple[Patterns, int, list[int]],
) -> None:
    patterns, source, sizes = case
    order = variable_order(patterns, source, sizes)
    every = {v for p in patterns for v in p}
    if not every <= reachable(patterns, source):
        assert order is None
        return
    assert order is not None
    assert sorted(order) == sorted(every - set(patterns[source]))
    bound = set(patterns[source])
    for var in order:
        binders = [j for j in constraining(patterns, var, bound) if j != source]
        assert binders, f"{var} is bound by no binding after {sorted(bound)}"
        bound.add(var)


@given(binding_sets())
def test_each_step_takes_a_most_constrained_then_smallest_candidate(
    case: tuple[Patterns, int, list[int]],
) -> None:
    patterns, source, sizes = case
    order = variable_order(patterns, source, sizes)
    if order is None:
        return
    bound = set(patterns[source])
    for var in order:

        def score(v: str, bound: set[str] = bound) -> tuple[int, int]:
            binders = [j for j in constraining(patterns, v, bound) if j != source]
            return (-len(binders), min(sizes[j] for j in binders))

        candidates = {
            v
            for p in patterns
            for v in p
            if v not in bound and any(j != source for j in constraining(patterns, v, bound))
        }
        assert score(var) == min(score(v) for v in candidates)
        bound.add(var)


# -- constants and negated bindings ---------------------------------------------------


def test_a_variable_equal_to_a_constant_is_bound_first_and_may_need_no_binding() -> None:
    path: Patterns = [("a", "b"), ("b", "c"), ("c", "d")]
    # From (a, b): d = 3 is proposed first (one value), then c is an intersection.
    assert variable_order(path, 0, [1, 1, 1], constants={"d"}) == ["d", "c"]
    # A constant connects what no binary binding does (a product with one value).
    assert variable_order([("a", "b"), ("c", "d")], 0, [1, 1], constants={"c"}) == ["c", "d"]
    assert variable_order([("a", "b"), ("c", "d")], 1, [1, 1], constants={"c"}) is None


def test_negated_bindings_never_propose_but_may_start_a_pipeline() -> None:
    patterns: Patterns = [("a", "b"), ("b", "c"), ("a", "c")]  # the last one negated
    assert variable_order(patterns, 0, [1, 1, 1], validators={2}) == ["c"]
    assert constraining(patterns, "c", {"a", "b"}, validators={2}) == [1]
    # From the negated binding's changes, b is proposed by both positive ones.
    assert variable_order(patterns, 2, [1, 1, 1], validators={2}) == ["b"]
    # Without the negated binding, (a, b) and (c,) would not connect.
    assert variable_order([("a", "b"), ("c",), ("b", "c")], 0, [1, 1, 1], validators={2}) is None


# -- the incremental order against the plain one ----------------------------------------


def plain_order(
    patterns: Patterns, source: int, sizes: list[int], constants: set[str], validators: set[int]
) -> list[str] | None:
    """The order as first written: every step scores every remaining variable
    against every binding (cubic in the body's length), the oracle of the
    incremental `variable_order`."""
    bound = set(patterns[source])
    every = [v for j, vars_ in enumerate(patterns) if j not in validators for v in vars_]
    remaining = list(dict.fromkeys(v for v in every if v not in bound))
    order: list[str] = []
    while remaining:
        scored = []
        for position, var in enumerate(remaining):
            binders = [j for j in constraining(patterns, var, bound, validators) if j != source]
            if binders or var in constants:
                smallest = min((sizes[j] for j in binders), default=0)
                scored.append((var not in constants, -len(binders), smallest, position, var))
        if not scored:
            return None
        var = min(scored)[4]
        order.append(var)
        bound.add(var)
        remaining.remove(var)
    return order


@given(binding_sets(), st.sets(st.sampled_from(VARS), max_size=2), st.data())
def test_the_incremental_order_is_the_plain_one(
    case: tuple[Patterns, int, list[int]], constants: set[str], data: st.DataObject
) -> None:
    patterns, source, sizes = case
    patterns = [*patterns, *data.draw(st.lists(st.sampled_from(VARS).map(lambda v: (v, v))))]
    sizes = [*sizes, *([3] * (len(patterns) - len(sizes)))]
    validators = data.draw(st.sets(st.integers(0, len(patterns) - 1), max_size=2))
    expected = plain_order(patterns, source, sizes, constants, validators)
    assert variable_order(patterns, source, sizes, constants, validators) == expected


def test_a_long_chain_is_ordered_outwards_from_its_middle() -> None:
    """3,000 bindings: the plain order scores every variable against every binding at
    every step (hours); the incremental one extends the chain one binding a step."""
    n = 3000
    chain: Patterns = [(f"x{i}", f"x{i + 1}") for i in range(n)]
    order = variable_order(chain, n // 2, [1] * n)
    assert order is not None and len(order) == n - 1
    bound = {f"x{n // 2}", f"x{n // 2 + 1}"}
    for var in order:  # each next variable is next to one bound already
        i = int(var[1:])
        assert f"x{i - 1}" in bound or f"x{i + 1}" in bound, var
        bound.add(var)
