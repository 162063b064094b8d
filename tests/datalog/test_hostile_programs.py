"""Programs that parse but would make the checker do exponential work, or recurse
as deep as they are long, are checked in bounded work or refused with a position.

No timing is asserted: counts of the work done are, where the defect was its amount."""

from __future__ import annotations

from unittest import mock

import pytest

from datalog import Database
from datalog.lang.checks import check_program
from datalog.lang.errors import BudgetExceeded, ComponentError, UnsupportedError
from datalog.lang.nesting import MAX_COMPONENT_NESTING
from datalog.lang.parser import parse_program
from datalog.lang.passes import check_generators
from datalog.lang.passes.instantiate_components import MAX_INSTANCES
from datalog.lang.passes.normalize_disjunctions import MAX_ALTERNATIVES

PROGRAM = ".decl r(x: number)\n.decl q(x: number)\nr(1).\n"


def nested_counts(depth: int) -> str:
    inner = "r(y)"
    for i in range(depth):
        inner = f"r(y{i}), c{i} = count : {{ {inner} }}"
    return PROGRAM + f"q(x) :- r(x), {inner}."


def test_nested_aggregates_are_checked_reading_each_body_once() -> None:
    """`check_generators` walked every aggregate again inside each enclosing one:
    2**depth visits (20 levels: 13 s, 24: minutes)."""
    calls = []
    real = check_generators.generator_binding

    def counted(literal: object) -> object:
        calls.append(literal)
        return real(literal)  # type: ignore[arg-type]

    program = parse_program(nested_counts(16))
    with mock.patch.object(check_generators, "generator_binding", counted):
        check_program(program)
    literals = 2 + 2 * 16  # q's body and every aggregate's own literals
    assert len(calls) <= 2 * literals  # the rule and its normalized copy


def test_deeply_nested_aggregates_evaluate() -> None:
    db = Database()
    db.define(nested_counts(40))
    assert db.query("q(x)") == [(1,)]


def test_a_body_of_ten_disjunctions_expands_and_one_more_is_refused_at_it() -> None:
    alternatives = ", (x = 1 ; x = 2)"
    db = Database()
    db.define(PROGRAM + "q(x) :- r(x)" + alternatives * 10 + ".")
    assert db.query("q(x)") == [(1,)]
    text = PROGRAM + "q(x) :- r(x)" + alternatives * 20 + "."
    with pytest.raises(UnsupportedError, match=f"more than {MAX_ALTERNATIVES} alternatives") as e:
        Database().define(text)
    assert e.value.line == 4
    assert e.value.column == len("q(x) :- r(x)") + len(alternatives) * 10 + 3
    with pytest.raises(UnsupportedError, match="alternatives"):
        db.query("r(x)" + alternatives * 11)


def test_a_chain_of_thousands_of_subtypes_resolves() -> None:
    """Resolving types recursed once per subtype (3,000: RecursionError)."""
    chain = "".join(f".type T{i} <: T{i - 1}\n" for i in range(1, 3000))
    db = Database()
    db.define(".type T0 <: number\n" + chain + ".decl r(x: T2999)\nr(7).")
    assert db.query("r(x)") == [(7,)]


def test_unions_sharing_their_bases_resolve_each_type_once() -> None:
    """A walk per path visits `A_n = A_{n-1} | B_{n-1}` 2**n times."""
    levels = "".join(f".type A{i} = A{i - 1} | B{i - 1}\n.type B{i} = A{i - 1} | B{i - 1}\n"
                     for i in range(1, 40))  # fmt: skip
    db = Database()
    db.define(".type A0 <: number\n.type B0 <: number\n" + levels + ".decl r(x: A39)\nr(7).")
    assert db.query("r(x)") == [(7,)]


def test_components_expanding_past_the_instance_limit_are_refused() -> None:
    doubling = "".join(
        f".comp C{i} {{ .init a = C{i - 1}\n.init b = C{i - 1} }}\n" for i in range(1, 15)
    )
    text = ".comp C0 { .decl a(x: number) }\n" + doubling + ".init top = C14\n"
    with pytest.raises(ComponentError, match=f"more than {MAX_INSTANCES} instances") as caught:
        Database().define(text)
    assert caught.value.line > 1


@pytest.mark.parametrize(
    ("step", "message"),
    [
        (".comp C{i} {{ .init a = C{j} }}\n", "instantiated more than"),
        (".comp C{i} : C{j} {{ }}\n", "inherit more than"),
    ],
)
def test_components_nested_past_the_limit_are_refused_not_a_recursion_error(
    step: str, message: str
) -> None:
    n = MAX_COMPONENT_NESTING + 1000
    chain = "".join(step.format(i=i, j=i - 1) for i in range(1, n))
    text = ".comp C0 { .decl a(x: number) }\n" + chain + f".init top = C{n - 1}\n"
    with pytest.raises(ComponentError, match=message) as caught:
        Database().define(text)
    assert caught.value.line > 1
    top = MAX_COMPONENT_NESTING - 1
    shallow = "".join(step.format(i=i, j=i - 1) for i in range(1, top + 1))
    db = Database()
    db.define(".comp C0 { .decl a(x: number) }\n" + shallow + f".init top = C{top}\n")
    assert any(name.startswith("top.") for name in db.checked.schema.names())


def test_checking_stops_with_the_budget_and_changes_nothing() -> None:
    db = Database()
    db.define(PROGRAM)
    with pytest.raises(BudgetExceeded), db.budget(0.0):
        db.define("q(x) :- r(x).")
    assert db.checked.schema.get("q") is not None
    assert db.query("q(x)") == []


def test_typing_a_long_sum_looks_at_each_term_a_few_times() -> None:
    """Each operator of `x = 1 + 1 + ... + 1` asked for the type of everything below
    it: 400 terms were 80,000 lookups per pass, and 50 such rules took 30 s."""
    from datalog.lang.passes import term_types

    calls = []
    real = term_types.fixed_type

    def counted(*args: object) -> object:
        calls.append(1)
        return real(*args)  # type: ignore[arg-type]

    expr = " + ".join(["1"] * 400)
    program = parse_program(PROGRAM + f"q(x) :- r(y), x = {expr}, y < x.")
    with mock.patch.object(term_types, "fixed_type", counted):
        check_program(program)
    assert 0 < len(calls) < 30 * 400


def test_a_chain_of_thousands_of_copying_rules_runs_off_the_stack() -> None:
    """`r{i}(x) :- r{i-1}(x).` 3,000 times: each rule is a stateless map, and maps
    delivered to each other recursively (3,000: RecursionError in `Stream.send`)."""
    n = 3000
    decls = "".join(f".decl r{i}(x: number)\n" for i in range(n + 1))
    rules = "".join(f"r{i}(x) :- r{i - 1}(x).\n" for i in range(1, n + 1))
    db = Database()
    db.define(decls + rules + "r0(1).\n")
    assert db.query(f"r{n}(x)") == [(1,)]  # a one-shot dataflow, from scratch
    got: list[list[tuple[object, ...]]] = []
    db.subscribe(f"r{n}(x)", lambda change: got.append(change.rows))
    db.insert("r0", [(2,)])
    assert got == [[(1,)], [(2,)]]
    assert db.query(f"r{n}(x)") == [(1,), (2,)]


def test_planning_a_chain_formats_each_rule_a_few_times_not_once_per_reader() -> None:
    """Each view key listed every rule below its relation: a chain of `n` rules
    formatted about `n * n / 2` rules to plan (98 s to subscribe to the end of 3,000)."""
    from datalog.plan import closures

    n = 400
    decls = "".join(f".decl r{i}(x: number)\n" for i in range(n + 1))
    rules = "".join(f"r{i}(x) :- r{i - 1}(x).\n" for i in range(1, n + 1))
    db = Database()
    db.define(decls + rules + "r0(1).\n")
    db.subscribe("r1(x)", lambda change: None)  # a second live reader: views are keyed
    calls: list[object] = []
    original = closures.format_rule
    counted = lambda rule: (calls.append(rule), original(rule))[1]  # noqa: E731
    with mock.patch.object(closures, "format_rule", counted):
        db.subscribe(f"r{n}(x)", lambda change: None)
    assert 0 < len(calls) <= 3 * n
