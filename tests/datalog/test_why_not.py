"""`Database.why_not`: the first failing premise of each rule under its best candidate
binding, by example (docs/adr/0045). The property tests against the reference
evaluator are in `test_why_not_reference.py`."""

from __future__ import annotations

import json

import pytest

from datalog import (
    Database,
    DatalogError,
    FactHoldsError,
    FactNotFoundError,
    WhyNot,
)
from datalog.lang.errors import BudgetExceeded, UnknownNameError

TC = """
.decl edge(src: number, dst: number)
.decl reach(src: number, dst: number)
reach(x, y) :- edge(x, y).
reach(x, z) :- reach(x, y), edge(y, z).
"""


def tc(edges: list[tuple[int, int]]) -> Database:
    db = Database()
    db.define(TC)
    db.insert("edge", edges)
    return db


def lines(explanation: WhyNot) -> list[str]:
    return str(explanation).splitlines()


def test_each_rule_shows_what_holds_and_the_first_premise_that_fails() -> None:
    db = tc([(1, 2), (2, 3)])
    assert lines(db.why_not("reach(1, 9)")) == [
        "reach(1, 9)  does not hold",
        "  reach(x, y) :- edge(x, y).  [line 4]",
        "    edge(1, 9)  missing",
        "  reach(x, z) :- reach(x, y), edge(y, z).  [line 5]",
        "    reach(1, 2)  holds",
        "    edge(2, 9)  missing",
    ]
    attempt = db.why_not("reach(1, 9)").attempts[1]
    assert (attempt.rule.line, attempt.rule.column) == (5, 1)
    assert attempt.binding == {"x": 1, "z": 9, "y": 2}
    assert [(p.kind, p.holds, p.index) for p in attempt.premises] == [
        ("atom", True, 0),
        ("atom", False, 1),
    ]
    assert attempt.failed.values == (2, 9) and attempt.failed.because is None  # a base fact


def test_the_longest_satisfied_prefix_wins_over_an_earlier_shorter_one() -> None:
    db = Database()
    db.define(
        ".decl e(x: number, y: number)\n.decl v(x: number)\n.decl w(x: number)\n"
        ".decl r(x: number)\nr(x) :- e(x, y), v(y), w(y)."
    )
    db.insert("e", [(1, 2), (1, 3), (1, 4)])
    db.insert("v", [(3,), (4,)])
    assert lines(db.why_not("r(1)"))[2:] == [
        "    e(1, 3)  holds",
        "    v(3)  holds",
        "    w(3)  missing",
    ]
    db.insert("w", [(4,)])
    db.retract("e", [(1, 4)])
    db.insert("v", [(2,)])  # now y = 2 and y = 3 both fail at w: the smaller one is shown
    assert lines(db.why_not("r(1)"))[2:] == [
        "    e(1, 2)  holds",
        "    v(2)  holds",
        "    w(2)  missing",
    ]


def test_ties_are_broken_in_value_order_whatever_the_symbols_ids() -> None:
    db = Database()
    db.define(".decl p(n: symbol)\n.decl q(n: symbol)\n.decl r()\nr() :- p(n), q(n).")
    db.insert("p", [("zeta",), ("alpha",), ("mid",)])  # interned in this order
    assert lines(db.why_not("r()"))[2:] == ['    p("alpha")  holds', '    q("alpha")  missing']


def test_a_missing_derived_premise_is_explained_in_turn_and_a_cycle_once() -> None:
    db = tc([(1, 2)])
    assert lines(db.why_not("reach(4, 1)")) == [
        "reach(4, 1)  does not hold",
        "  reach(x, y) :- edge(x, y).  [line 4]",
        "    edge(4, 1)  missing",
        "  reach(x, z) :- reach(x, y), edge(y, z).  [line 5]",
        "    reach(4, y)  missing",
        "      reach(x, y) :- edge(x, y).  [line 4]",
        "        edge(4, y)  missing",
        "      reach(x, z) :- reach(x, y), edge(y, z).  [line 5]",
        "        reach(4, y)  missing (explained above)",
    ]
    nested = db.why_not("reach(4, 1)").attempts[1].failed.because
    assert nested is not None and nested.values == (4, None)


def test_nesting_stops_at_the_depth_and_the_size_asked() -> None:
    db = Database()
    db.define(
        ".decl b(x: number)\n.decl r1(x: number)\n.decl r2(x: number)\n.decl r3(x: number)\n"
        "r1(x) :- b(x).\nr2(x) :- r1(x).\nr3(x) :- r2(x)."
    )
    assert lines(db.why_not("r3(1)", depth=1)) == [
        "r3(1)  does not hold",
        "  r3(x) :- r2(x).  [line 7]",
        "    r2(1)  missing",
        "      r2(x) :- r1(x).  [line 6]",
        "        r1(1)  missing (not explained further: depth 1)",
    ]
    assert lines(db.why_not("r3(1)"))[-1] == "            b(1)  missing"
    assert "holds 2 rule attempts already" in lines(db.why_not("r3(1)", size=2))[-1]


def test_a_negation_that_holds_names_the_tuple_that_makes_it_hold() -> None:
    db = tc([(1, 2), (2, 3)])
    db.define(".decl root(x: number)\nroot(x) :- edge(x, _), !edge(_, x).")
    explanation = db.why_not("root(2)")
    assert lines(explanation)[2:] == [
        "    edge(2, 3)  holds",
        "    !edge(_, 2)  fails: edge(1, 2) holds",
    ]
    failed = explanation.attempts[0].failed
    assert (failed.kind, failed.values, failed.witness) == ("negation", (None, 2), (1, 2))


def test_comparisons_functors_and_computed_heads() -> None:
    db = Database()
    db.define(
        ".decl n(x: number)\n.decl big(x: number)\n.decl next(x: number)\n"
        ".decl name(s: symbol)\n.decl short(s: symbol)\n"
        "big(x) :- n(x), x > 5.\nnext(x + 1) :- n(x).\n"
        "short(t) :- name(s), t = substr(s, 0, 2), strlen(s) > 3."
    )
    db.insert("n", [(3,)])
    db.insert("name", [("ab",)])
    assert lines(db.why_not("big(3)"))[2:] == ["    n(3)  holds", "    3 > 5  false"]
    assert lines(db.why_not("next(9)"))[2:] == ["    n(3)  holds", "    9 = 3 + 1  false"]
    assert db.why_not("next(9)").attempts[0].failed.kind == "head"
    assert lines(db.why_not('short("ab")'))[2:] == [
        '    name("ab")  holds',
        '    "ab" = substr("ab", 0, 2)  holds',
        '    strlen("ab") > 3  false',
    ]


def test_aggregates_are_explained_by_their_value() -> None:
    db = tc([(1, 2), (1, 3)])
    db.define(
        ".decl outdeg(x: number, n: number)\n.decl least(x: number, m: number)\n"
        "outdeg(x, n) :- edge(x, _), n = count : { edge(x, _) }.\n"
        "least(x, m) :- edge(_, x), m = min y : { edge(x, y) }."
    )
    assert lines(db.why_not("outdeg(1, 5)"))[2:] == [
        "    edge(1, 2)  holds",
        "    5 = count : { edge(1, _) }  false: the aggregate's value is 2",
    ]
    failed = db.why_not("least(2, 0)").attempts[0].failed
    assert (failed.kind, failed.value) == ("aggregate", None)
    assert failed.reason.startswith("has no value")


def test_a_subsumed_tuple_is_explained_by_the_tuple_that_beats_it() -> None:
    db = Database()
    db.define(
        ".decl edge(x: number, y: number, w: number)\n.decl dist(x: number, d: number)\n"
        "dist(1, 0).\ndist(y, d + w) :- dist(x, d), edge(x, y, w).\n"
        "dist(x, d1) <= dist(x, d2) :- d2 <= d1."
    )
    db.insert("edge", [(1, 2, 5), (1, 3, 1), (3, 2, 1), (2, 1, 1)])  # a cycle back to 1
    assert lines(db.why_not("dist(2, 5)"))[2:] == [
        "    dist(1, 0)  holds",
        "    edge(1, 2, 5)  holds",
        "    5 = 0 + 5  holds",
        "    dist(2, 5)  derived, but subsumed by dist(2, 2) (line 5)",
    ]
    assert db.why_not("dist(2, 5)").attempts[0].failed.witness == (2, 2)


def test_why_on_a_subsumed_relation_explains_only_tuples_that_hold_and_ends_on_cycles() -> None:
    db = Database()
    db.define(
        ".decl edge(x: number, y: number, w: number)\n.decl dist(x: number, d: number)\n"
        "dist(1, 0).\ndist(y, d + w) :- dist(x, d), edge(x, y, w).\n"
        "dist(x, d1) <= dist(x, d2) :- d2 <= d1."
    )
    db.insert("edge", [(1, 2, 5), (2, 1, 1)])  # before: why looped around the cycle forever
    with db.budget(60):
        assert db.why("dist(2, 5)").height == 1
    db.insert("edge", [(1, 2, 3)])  # dist(2, 5) is subsumed: before, why still proved it
    with pytest.raises(FactNotFoundError, match="`why_not` explains why"):
        db.why("dist(2, 5)")


def test_a_fact_that_holds_is_refused_and_points_to_why() -> None:
    db = tc([(1, 2)])
    with pytest.raises(
        FactHoldsError, match=r"`reach\(1, 2\)` holds at epoch \d+: `why`"
    ) as caught:
        db.why_not("reach(1, 2)")
    assert caught.value.category == "conflict"
    with pytest.raises(FactHoldsError):
        db.why_not("edge(1, 2)")
    with pytest.raises(FactNotFoundError, match="`why_not` explains why"):
        db.why("reach(2, 1)")


def test_a_base_relation_and_a_rule_whose_head_cannot_match() -> None:
    db = tc([(1, 2)])
    db.define(".decl one(x: number)\none(1) :- edge(_, _).")
    assert lines(db.why_not("edge(5, 6)")) == [
        "edge(5, 6)  does not hold: no rule derives `edge`, and no such tuple was inserted"
    ]
    assert lines(db.why_not("one(2)")) == [
        "one(2)  does not hold: no rule's head matches it, and no such tuple was inserted"
    ]


@pytest.mark.parametrize(
    ("text", "error", "message"),
    [
        ("rech(1, 2)", UnknownNameError, "did you mean `reach`"),
        ("reach(1, y)", DatalogError, "`why_not` needs a ground fact: `y`"),
        ("reach(1, 2), edge(1, 2)", DatalogError, "`why_not` explains one fact"),
    ],
)
def test_bad_facts_get_clear_errors(text: str, error: type[DatalogError], message: str) -> None:
    with pytest.raises(error, match=message):
        tc([(1, 2)]).why_not(text)


def test_as_of_explains_the_past_with_the_rules_then() -> None:
    db = tc([(1, 2)])
    before = db.epoch
    db.insert("edge", [(2, 3)])
    db.redefine("reach", "reach(x, y) :- edge(x, y).")
    assert lines(db.why_not("reach(1, 3)", as_of=before))[-1] == "    edge(2, 3)  missing"
    assert len(db.why_not("reach(1, 3)").attempts) == 1  # the one rule left
    with pytest.raises(FactHoldsError):
        db.why_not("reach(1, 2)", as_of=before)


def test_a_spent_budget_stops_why_not() -> None:
    db = tc([(i, i + 1) for i in range(50)])
    with pytest.raises(BudgetExceeded), db.budget(0.0):
        db.why_not("reach(0, 99)")


def test_the_json_form_holds_the_whole_tree() -> None:
    db = tc([(1, 2)])
    tree = json.loads(json.dumps(db.why_not("reach(4, 1)").to_dict()))
    assert (tree["kind"], tree["fact"], tree["values"]) == ("absent", "reach(4, 1)", [4, 1])
    second = tree["rules"][1]
    assert second["rule"] == {"text": "reach(x, z) :- reach(x, y), edge(y, z).", "line": 5,
                              "column": 1}  # fmt: skip
    failed = second["premises"][-1]
    assert (failed["text"], failed["holds"], failed["values"]) == ("reach(4, y)", False, [4, None])
    assert failed["because"]["rules"][1]["premises"][-1]["because"]["note"] == "explained above"


def test_why_not_reads_nothing_it_does_not_need_and_changes_nothing() -> None:
    db = tc([(1, 2)])
    db.define(".decl tag(s: symbol)\n.decl tagged(s: symbol)\ntagged(s) :- tag(s).")
    epoch, symbols = db.epoch, len(db.symbols)
    db.why_not('tagged("never seen")')
    assert (db.epoch, len(db.symbols)) == (epoch, symbols)
    assert not db.live


def test_the_repl_prints_why_not_now_and_as_of_an_epoch(capsys: pytest.CaptureFixture[str]) -> None:
    from datalog.cli.repl import Session

    session = Session()
    for line in [*TC.strip().splitlines(), ":insert edge (1, 2)", ":insert edge (2, 3)",
                 ":why-not reach(1, 4)", ":asof 4 :why-not reach(1, 3)", ":why-not reach(1, 2)",
                 ":why-not", ":help"]:  # fmt: skip
        assert session.handle(line)
    out, err = capsys.readouterr()
    assert "reach(1, 4)  does not hold\n  reach(x, y) :- edge(x, y).  [line 1]\n" in out
    assert "    reach(1, 2)  holds\n    edge(2, 3)  missing\n" in out  # as of epoch 4
    assert "`reach(1, 2)` holds" in err and "a fact is missing, e.g. `:why-not" in err
    assert ":why-not FACT" in out
