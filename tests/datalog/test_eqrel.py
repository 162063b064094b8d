"""`eqrel`: the equivalence closure of what is inserted or derived, kept up to date."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from datalog import Change, Database

PROGRAM = """
.decl link(a: number, b: number)
.decl same(a: number, b: number) eqrel
same(a, b) :- link(a, b).
"""

OPS = st.lists(
    st.tuples(
        st.sampled_from(["link", "same"]),
        st.booleans(),
        st.tuples(st.integers(0, 5), st.integers(0, 5)),
    ),
    max_size=25,
)


def closure(pairs: set[tuple[int, int]]) -> set[tuple[int, int]]:
    """Reflexive, symmetric, transitive closure, by union-find over the elements."""
    parent: dict[int, int] = {}

    def find(x: int) -> int:
        parent.setdefault(x, x)
        while parent[x] != x:
            x = parent[x]
        return x

    for a, b in pairs:
        parent[find(a)] = find(b)
    classes: dict[int, list[int]] = {}
    for x in list(parent):
        classes.setdefault(find(x), []).append(x)
    return {(a, b) for members in classes.values() for a in members for b in members}


@given(OPS)
def test_eqrel_equals_a_union_find_closure_under_inserts_and_retracts(
    ops: list[tuple[str, bool, tuple[int, int]]],
) -> None:
    db = Database()
    db.define(PROGRAM)
    seen: list[Change] = []
    db.subscribe("same(x, y)", seen.append)
    facts: dict[str, set[tuple[int, int]]] = {"link": set(), "same": set()}
    for relation, inserting, row in ops:
        if inserting:
            db.insert(relation, [row])
            facts[relation].add(row)
        else:
            db.retract(relation, [row])
            facts[relation].discard(row)
        expected = closure(facts["link"] | facts["same"])
        assert set(db.query("same(x, y)")) == expected
        live: dict[tuple[object, ...], int] = {}
        for change in seen:
            for r, d in zip(change.rows, change.diffs, strict=True):
                live[r] = live.get(r, 0) + d
        assert {r for r, n in live.items() if n} == expected
