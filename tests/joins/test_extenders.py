"""Prefix extenders (joins/extenders.py): count, propose and validate.

Small arrangements are built with `differential` directly: an engine with base
relations, a dataflow importing their shared arrangements, started (so lookups
read the sealed trace), and optionally a staged epoch (the pending batch that
`include_delta` shows or hides, as while a dataflow runs that epoch).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
from hypothesis import given
from hypothesis import strategies as st

from differential.batch import Updates, consolidate
from differential.engine import Engine
from differential.operators.shared import ImportOp
from differential.time import Time
from joins.extenders import (
    NEVER,
    AntijoinExtender,
    CollectionExtender,
    ConstantExtender,
    PredicateExtender,
    Prefixes,
    Proposals,
    UnaryExtender,
)
from tests.differential.harness import new_engine, requests

Row = tuple[int, ...]
NOW = (2,)  # the epoch after the loaded one: lookups at NOW read the sealed trace


class Relation:
    """Binary relation `e` loaded at epoch 1 and its arrangements in one dataflow."""

    def __init__(self, rows: Sequence[Row], unary: Sequence[Row] = ()) -> None:
        self.engine: Engine = new_engine({"e": 2, "v": 1})
        self.engine.commit(
            {
                "e": requests([(True, r) for r in rows], 2),
                "v": requests([(True, r) for r in unary], 1),
            }
        )
        df = self.engine.dataflow("extenders")
        self.by_first: ImportOp = df.import_input("e", [0, 1], 1)
        self.by_second: ImportOp = df.import_input("e", [1, 0], 1)
        self.by_both: ImportOp = df.import_input("e", [0, 1], 2)
        self.unary: ImportOp = df.import_input("v", [0], 1)
        self.engine.start(df)

    def stage(self, ops: Sequence[tuple[bool, Row]]) -> None:
        """Changes of epoch 2, pending (not sealed) as while dataflows run epoch 2."""
        inp = self.engine.inputs["e"]
        inp.stage(inp.diffs(requests(ops, 2), NOW[0]), NOW[0])

    def forward(self, include_delta: bool = False) -> CollectionExtender:
        """Proposes y for bound x: the binding e(x, y)."""
        return CollectionExtender("x", "y", self.by_first, self.by_both, ("x", "y"), include_delta)

    def backward(self, include_delta: bool = False) -> CollectionExtender:
        """Proposes x for bound y: the binding e(x, y)."""
        return CollectionExtender("y", "x", self.by_second, self.by_both, ("x", "y"), include_delta)


def prefixes(
    vars_: Sequence[str], rows: Sequence[Row], diffs: Sequence[int] | None = None, time: int = 2
) -> Prefixes:
    columns = [np.array([r[i] for r in rows], dtype=np.int64) for i in range(len(vars_))]
    d = np.array(diffs if diffs is not None else [1] * len(rows), dtype=np.int64)
    return Prefixes(tuple(vars_), Updates.at(columns, (time,), d))


def _proposed(
    extender: CollectionExtender | UnaryExtender | ConstantExtender, p: Prefixes, time: Time
) -> Prefixes:
    """Every prefix extended by what `extender` proposes for it."""
    rows = np.arange(len(p), dtype=np.intp)
    return extender.propose(p, rows, time).extend(p, extender.value)


def bag(p: Prefixes, order: Sequence[str] | None = None) -> Counter[Row]:
    """Rows (in `order` of variables) with their net multiplicities; times ignored."""
    order = order or p.vars
    u = consolidate(p.updates.with_times(np.zeros_like(p.updates.times)))
    out: Counter[Row] = Counter()
    columns = [u.columns[p.vars.index(v)].tolist() for v in order]
    for i, diff in enumerate(u.diffs.tolist()):
        out[tuple(int(c[i]) for c in columns)] += diff
    return out


EDGES: list[Row] = [(1, 10), (1, 11), (1, 12), (2, 10), (3, 11)]


# -- count -------------------------------------------------------------------------


def test_count_is_the_number_of_entries_under_each_prefix_key() -> None:
    rel = Relation(EDGES)
    p = prefixes(["x"], [(1,), (2,), (4,), (1,), (3,)])
    assert rel.forward().count(p, NOW).tolist() == [3, 1, 0, 3, 1]
    q = prefixes(["y"], [(10,), (11,), (12,), (13,)])
    assert rel.backward().count(q, NOW).tolist() == [2, 2, 1, 0]


def test_count_sees_the_current_epoch_only_when_the_binding_is_new() -> None:
    rel = Relation(EDGES)
    rel.stage([(True, (2, 13)), (True, (4, 10)), (False, (3, 11))])
    p = prefixes(["x"], [(1,), (2,), (3,), (4,)])
    assert rel.forward(include_delta=False).count(p, NOW).tolist() == [3, 1, 1, 0]
    # Entries, not net multiplicities: the retraction of (3, 11) is one more entry.
    assert rel.forward(include_delta=True).count(p, NOW).tolist() == [3, 2, 2, 1]


# -- propose -----------------------------------------------------------------------


def test_propose_extends_each_prefix_by_every_value_under_its_key() -> None:
    rel = Relation(EDGES)
    p = prefixes(["x"], [(1,), (2,), (4,)], diffs=[1, 2, 1])
    out = _proposed(rel.forward(), p, NOW)
    assert out.vars == ("x", "y")
    assert bag(out) == Counter({(1, 10): 1, (1, 11): 1, (1, 12): 1, (2, 10): 2})


def test_propose_backwards_binds_the_first_column() -> None:
    rel = Relation(EDGES)
    out = _proposed(rel.backward(), prefixes(["y"], [(10,), (11,)], diffs=[1, -1]), NOW)
    assert out.vars == ("y", "x")
    assert bag(out, ["x", "y"]) == Counter({(1, 10): 1, (2, 10): 1, (1, 11): -1, (3, 11): -1})


def test_propose_multiplies_diffs_and_joins_times() -> None:
    rel = Relation(EDGES)
    rel.stage([(False, (1, 10)), (True, (1, 13))])
    out = _proposed(rel.forward(include_delta=True), prefixes(["x"], [(1,)], diffs=[-2]), NOW)
    # Old (1, 10) at epoch 1 and its retraction at epoch 2 cancel; (1, 13) is new.
    assert bag(out) == Counter({(1, 11): -2, (1, 12): -2, (1, 13): -2})
    # Every derivation carries the later of the prefix's and the entry's times.
    assert (out.updates.times == 2).all()
    old = _proposed(rel.forward(include_delta=False), prefixes(["x"], [(1,)]), NOW)
    assert bag(old) == Counter({(1, 10): 1, (1, 11): 1, (1, 12): 1})


def test_propose_keeps_the_later_time_of_prefix_and_entry() -> None:
    rel = Relation(EDGES)
    later = prefixes(["x"], [(2,)], time=7)
    assert _proposed(rel.forward(), later, (7,)).updates.times.tolist() == [[7]]
    rel.stage([(True, (2, 13))])
    earlier = prefixes(["x"], [(2,)], time=0)
    out = _proposed(rel.forward(include_delta=True), earlier, NOW)
    times = dict(zip(out.column("y").tolist(), out.updates.times[0].tolist(), strict=True))
    assert times[13] == 2  # the staged entry's time
    assert times[10] <= 2  # a compacted trace time, never later than the present


# -- validate ----------------------------------------------------------------------


def test_validate_keeps_the_prefixes_whose_pair_is_present() -> None:
    rel = Relation(EDGES)
    p = prefixes(["x", "y"], [(1, 10), (1, 13), (2, 10), (3, 10)], diffs=[1, 1, 3, 1])
    assert bag(rel.forward().filter(p, NOW)) == Counter({(1, 10): 1, (2, 10): 3})


def test_validate_reads_the_pair_in_binding_order_whatever_the_prefix_order() -> None:
    rel = Relation(EDGES)
    p = prefixes(["y", "x"], [(10, 1), (1, 10), (11, 3)])
    assert bag(rel.backward().filter(p, NOW)) == Counter({(10, 1): 1, (11, 3): 1})


def test_validate_sees_the_current_epoch_only_when_the_binding_is_new() -> None:
    rel = Relation(EDGES)
    rel.stage([(False, (1, 10)), (True, (4, 4))])
    p = prefixes(["x", "y"], [(1, 10), (4, 4)])
    assert bag(rel.forward(include_delta=False).filter(p, NOW)) == Counter({(1, 10): 1})
    assert bag(rel.forward(include_delta=True).filter(p, NOW)) == Counter({(4, 4): 1})


# -- unary, constant and predicate extenders ---------------------------------------


def test_a_unary_extender_counts_its_set_size_proposes_its_values_and_validates() -> None:
    rel = Relation(EDGES, unary=[(10,), (12,)])
    unary = UnaryExtender("y", rel.unary, include_delta=False)
    p = prefixes(["x", "y"], [(1, 10), (1, 11), (1, 12)])
    assert unary.count(p, NOW).tolist() == [2, 2, 2]  # the set's size, whatever the prefix
    assert bag(unary.filter(p, NOW)) == Counter({(1, 10): 1, (1, 12): 1})
    # Proposing crosses every prefix with every value, multiplicities multiplied.
    q = prefixes(["x"], [(1,), (2,)], diffs=[1, -2])
    out = _proposed(unary, q, NOW)
    assert out.vars == ("x", "y")
    assert bag(out) == Counter({(1, 10): 1, (1, 12): 1, (2, 10): -2, (2, 12): -2})


def test_a_unary_extender_proposes_the_set_as_old_or_new() -> None:
    rel = Relation(EDGES, unary=[(10,), (12,)])
    inp = rel.engine.inputs["v"]
    inp.stage(inp.diffs(requests([(False, (10,)), (True, (13,))], 1), NOW[0]), NOW[0])
    q = prefixes(["x"], [(1,)])
    old = UnaryExtender("y", rel.unary, include_delta=False)
    new = UnaryExtender("y", rel.unary, include_delta=True)
    assert bag(_proposed(old, q, NOW)) == Counter({(1, 10): 1, (1, 12): 1})
    assert bag(_proposed(new, q, NOW)) == Counter({(1, 12): 1, (1, 13): 1})
    assert old.count(q, NOW).tolist() == [2]  # entries, as for lookups
    assert new.count(q, NOW).tolist() == [4]
    # Through propose and validate (the delta query's late materialization).
    rows = np.array([0], dtype=np.intp)
    proposed = new.propose(q, rows, NOW)
    checked = rel.forward().validate(q, proposed, NOW)  # e holds (1, 10), (1, 11), (1, 12)
    assert bag(checked.extend(q, "y")) == Counter({(1, 12): 1})


def test_an_antijoin_keeps_the_prefixes_whose_tuple_is_absent() -> None:
    rel = Relation(EDGES)
    p = prefixes(["y", "x"], [(10, 1), (13, 1), (10, 2), (11, 2)], diffs=[1, 2, -1, 3])
    absent = AntijoinExtender(("x", "y"), rel.by_both, include_delta=False)
    assert absent.count(p, NOW).tolist() == [NEVER] * 4
    assert bag(absent.filter(p, NOW)) == Counter({(13, 1): 2, (11, 2): 3})


def test_an_antijoin_sees_the_current_epoch_only_when_the_binding_is_new() -> None:
    rel = Relation(EDGES)
    rel.stage([(False, (1, 10)), (True, (4, 4))])
    p = prefixes(["x", "y"], [(1, 10), (4, 4), (5, 5)])
    old = AntijoinExtender(("x", "y"), rel.by_both, include_delta=False)
    new = AntijoinExtender(("x", "y"), rel.by_both, include_delta=True)
    assert bag(old.filter(p, NOW)) == Counter({(4, 4): 1, (5, 5): 1})
    assert bag(new.filter(p, NOW)) == Counter({(1, 10): 1, (5, 5): 1})


def test_an_antijoin_checks_proposals_by_the_proposed_variable() -> None:
    rel = Relation(EDGES)
    q = prefixes(["x"], [(1,), (2,)], diffs=[1, -1])
    candidates = Proposals(
        np.array([0, 0, 1, 1], dtype=np.intp), np.array([10, 13, 10, 11], dtype=np.int64)
    )
    absent = AntijoinExtender(("x", "y"), rel.by_both, include_delta=False, proposing="y")
    out = absent.validate(q, candidates, NOW).extend(q, "y")
    assert bag(out) == Counter({(1, 13): 1, (2, 11): -1})


def test_an_antijoin_entry_later_than_the_prefix_becomes_a_correction_row() -> None:
    # In a partially ordered time an entry of the negated relation may be at a
    # time not before the prefix's: the factor 1 - N is then exact only if the
    # prefix is kept now and retracted at the joined time.
    rel = Relation(EDGES)
    rel.stage([(True, (4, 4))])  # at epoch 2
    early = prefixes(["x", "y"], [(4, 4)], time=0)
    absent = AntijoinExtender(("x", "y"), rel.by_both, include_delta=True)
    out = absent.filter(early, NOW)
    rows = sorted(zip(out.updates.times[0].tolist(), out.updates.diffs.tolist(), strict=True))
    assert rows == [(0, 1), (2, -1)]
    candidates = Proposals(np.array([0], dtype=np.intp), np.array([4], dtype=np.int64))
    start = prefixes(["x"], [(4,)], time=0)
    checked = AntijoinExtender(("x", "y"), rel.by_both, True, "y").validate(start, candidates, NOW)
    got = checked.extend(start, "y").updates
    assert sorted(zip(got.times[0].tolist(), got.diffs.tolist(), strict=True)) == [(0, 1), (2, -1)]


def test_a_constant_extender_counts_one_and_proposes_its_constant() -> None:
    const = ConstantExtender("y", 7, np.dtype(np.int64))
    p = prefixes(["x"], [(1,), (2,)], diffs=[1, -1])
    assert const.count(p, NOW).tolist() == [1, 1]
    assert bag(_proposed(const, p, NOW)) == Counter({(1, 7): 1, (2, 7): -1})
    q = prefixes(["x", "y"], [(1, 7), (2, 8)])
    assert bag(const.filter(q, NOW)) == Counter({(1, 7): 1})


def test_a_less_than_predicate_keeps_exactly_the_rows_where_it_holds() -> None:
    # 3DF inverted the comparison; `x < y` must keep x < y and nothing else.
    def holds(p: Prefixes) -> npt.NDArray[np.bool_]:
        return np.less(p.column("x"), p.column("y"))

    less = PredicateExtender(frozenset({"x", "y"}), holds, "x < y")
    p = prefixes(["x", "y"], [(1, 2), (2, 1), (3, 3)])
    assert bag(less.filter(p, NOW)) == Counter({(1, 2): 1})
    empty = prefixes(["x", "y"], [])
    assert len(less.filter(empty, NOW)) == 0


# -- GenericJoin: any proposer gives the same intersection --------------------------

pairs = st.lists(st.tuples(st.integers(0, 4), st.integers(0, 4)), max_size=15, unique=True)


@given(e=pairs, f=pairs, keys=st.lists(st.integers(0, 4), min_size=1, max_size=6))
def test_propose_then_validate_is_the_intersection_whichever_side_proposes(
    e: list[Row], f: list[Row], keys: list[int]
) -> None:
    """Extending x by y through e(x, y) and f(x, y) (f stored reversed as e's backward view)."""
    rel_e, rel_f = Relation(e), Relation(f)
    p = prefixes(["x"], [(k,) for k in keys])
    ext_e, ext_f = rel_e.forward(), rel_f.forward()
    via_e = ext_f.filter(_proposed(ext_e, p, NOW), NOW)
    via_f = ext_e.filter(_proposed(ext_f, p, NOW), NOW)
    expected = Counter((k, y) for k in keys for (x, y) in set(e) & set(f) if x == k)
    assert bag(via_e) == expected
    assert bag(via_f) == expected
    counts_e = ext_e.count(p, NOW).tolist()
    assert counts_e == [sum(1 for x, _ in e if x == k) for k in keys]
