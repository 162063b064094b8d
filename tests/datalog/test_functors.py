"""User-defined functors (`.functor`, `@f(...)`) bound to Python functions: the
calling convention, typed results, errors that change nothing, incremental
maintenance, durability and the back ends that refuse them."""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from datalog import Change, Database, DatalogError, FunctorError, UnboundFunctorError, vectorized
from datalog.lang.ast import Call, UserFunctor
from datalog.lang.errors import UnsupportedError
from datalog.lang.parser import parse_program
from datalog.lang.pretty import format_program

PROGRAM = """
.functor twice(x: number): number
.functor tag(s: symbol, n: number): symbol
.decl item(id: number, name: symbol)
.decl doubled(id: number, d: number)
.decl tagged(id: number, t: symbol)
doubled(id, @twice(id)) :- item(id, _).
tagged(id, @tag(n, id)) :- item(id, n).
"""

TAG = {"tag": lambda s, n: f"{s}#{n}"}


class Accumulated:
    """A subscription's rows, rebuilt from its snapshot and changes."""

    def __init__(self) -> None:
        self.counts: Counter[tuple[Any, ...]] = Counter()
        self.changes: list[Change] = []

    def __call__(self, change: Change) -> None:
        self.changes.append(change)
        for row, diff in zip(change.rows, change.diffs, strict=True):
            self.counts[row] += diff
        assert all(n in (0, 1) for n in self.counts.values())

    def rows(self) -> set[tuple[Any, ...]]:
        return {row for row, n in self.counts.items() if n}


def database(**functors: Any) -> Database:
    db = Database(functors={"twice": lambda x: 2 * x, **TAG, **functors})
    db.define(PROGRAM)
    return db


# -- syntax and binding ------------------------------------------------------------------


def test_declarations_and_calls_print_back_to_the_same_program() -> None:
    text = '.functor f(a: number, symbol): float stateful\n.decl r(x: float)\nr(@f(1, "a")).\n'
    program = parse_program(text)
    assert format_program(program) == text
    assert parse_program(format_program(program)) == program


def test_plain_functors_get_python_values_and_vectorized_ones_numpy_columns() -> None:
    seen: list[tuple[Any, ...]] = []

    def plain(x: int, s: str, f: float) -> str:
        seen.append((type(x), type(s), type(f)))
        return f"{s}{x}{f}"

    def columns(x: np.ndarray, s: np.ndarray, f: np.ndarray) -> np.ndarray:
        seen.append((x.dtype, s.dtype, f.dtype, type(s[0])))
        return x * 2

    db = Database(functors={"plain": plain, "cols": vectorized(columns)})
    db.define(
        ".functor plain(x: unsigned, s: symbol, f: float): symbol\n"
        ".functor cols(x: unsigned, s: symbol, f: float): unsigned\n"
        ".decl r(x: unsigned, s: symbol, f: float)\n"
        ".decl out(a: symbol, b: unsigned)\n"
        "out(@plain(x, s, f), @cols(x, s, f)) :- r(x, s, f).\n"
        'r(7u, "a", 0.5).'
    )
    assert db.query("out(a, b)") == [("a70.5", 14)]
    assert (int, str, float) in seen
    assert (np.dtype(np.uint64), np.dtype(object), np.dtype(np.float64), str) in seen


def test_a_plain_functor_is_called_once_per_distinct_argument_tuple() -> None:
    calls: list[int] = []
    db = Database(functors={"f": lambda x: calls.append(x) or x})
    db.define(".functor f(x: number): number\n.decl r(x: number, y: number)\n")
    db.define(".decl s(x: number)\ns(@f(x)) :- r(x, _).")
    db.insert("r", [(1, 1), (1, 2), (2, 1)])
    assert db.query("s(x)") == [(1,), (2,)]
    assert sorted(calls) == [1, 2]


def test_register_functor_binds_late_and_accepts_the_at_sign() -> None:
    db = Database(functors=TAG)
    db.define(PROGRAM + 'item(1, "a").')
    assert db.query("tagged(i, t)") == [(1, "a#1")]  # needs no @twice
    with pytest.raises(UnboundFunctorError) as caught:
        db.query("doubled(i, d)")
    assert "`@twice` is declared but not bound" in caught.value.message
    assert "functors={'twice': fn}" in caught.value.message
    assert (caught.value.line, caught.value.column) == (7, 13)
    db.register_functor("@twice", lambda x: x * 2)
    assert db.query("doubled(i, d)") == [(1, 2)]


def test_bindings_are_checked_when_given() -> None:
    with pytest.raises(UnsupportedError, match="must be bound to a callable"):
        Database(functors={"f": 3})
    with pytest.raises(UnsupportedError, match="an identifier"):
        Database().register_functor("no way", len)


def test_a_vectorized_functor_needs_arguments() -> None:
    db = Database(functors={"now": vectorized(lambda: np.zeros(1))})
    db.define(".functor now(): number\n.decl r(x: number)\nr(@now()) :- r(_).")
    with pytest.raises(UnsupportedError, match="takes no arguments"):
        db.query("r(x)")
    db.register_functor("now", lambda: 42)
    db.insert("r", [(1,)])
    assert db.query("r(x)") == [(1,), (42,)]


def test_a_functor_in_a_query_and_in_a_negated_atom() -> None:
    db = database()
    db.insert("item", [(1, "a"), (2, "b"), (3, "c")])
    assert db.query("item(i, _), @twice(i) > 3") == [(2,), (3,)]
    assert db.query('item(i, _), !tagged(i, @tag("b", i))') == [(1,), (3,)]


def test_an_argument_without_a_value_drops_the_row_without_calling() -> None:
    calls: list[int] = []
    db = Database(functors={"f": lambda x: calls.append(x) or x})
    db.define(".functor f(x: number): number\n.decl r(x: number)\n.decl s(x: number)")
    db.define("s(@f(10 / x)) :- r(x).")
    db.insert("r", [(0,), (5,)])
    assert db.query("s(x)") == [(2,)]
    assert calls == [2]


# -- typed results -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("result", "kind", "value", "reason"),
    [
        ("number", "'7'", "'7'", "expected a number"),
        ("number", "1.5", "1.5", "a fraction"),
        ("number", "2**63", "9223372036854775808", "out of the range of number"),
        ("unsigned", "-1", "-1", "out of the range of unsigned"),
        ("float", "math.nan", "nan", "NaN is not a value"),
        ("number", "None", "None", "expected a number"),
        ("number", "True", "True", "expected a number"),
        ("symbol", "7", "7", "expected a symbol"),
    ],
)
@pytest.mark.parametrize("is_vectorized", [False, True])
def test_a_result_that_does_not_fit_is_an_error_naming_functor_and_row(
    result: str, kind: str, value: str, reason: str, is_vectorized: bool
) -> None:
    bad = eval(kind, {"math": math})
    fn = (lambda x: np.array([bad], dtype=object)) if is_vectorized else (lambda x: bad)
    binding = vectorized(fn) if is_vectorized else fn
    db = Database(functors={"f": binding})
    db.define(f".functor f(x: symbol): {result}\n.decl r(s: symbol)\n.decl out(v: {result})")
    db.define('out(@f(s)) :- r(s).\nr("row").')
    with pytest.raises(FunctorError) as caught:
        db.query("out(v)")
    assert caught.value.message.startswith(f'`@f("row")` returned {value}')
    assert reason in caught.value.message
    assert (caught.value.line, caught.value.column) == (1, 5)


def test_fitting_results_are_converted_to_the_declared_type() -> None:
    db = Database(functors={"f": lambda x: 3.0, "g": lambda x: np.int64(5), "h": lambda x: 2})
    db.define(
        ".functor f(x: number): number\n.functor g(x: number): unsigned\n"
        ".functor h(x: number): float\n.decl r(x: number)\n"
        ".decl out(a: number, b: unsigned, c: float)\nout(@f(x), @g(x), @h(x)) :- r(x).\nr(1)."
    )
    assert db.query("out(a, b, c)") == [(3, 5, 2.0)]


def test_a_vectorized_result_of_the_wrong_shape_or_a_misfit_row_is_named() -> None:
    db = Database(functors={"f": vectorized(lambda x: x[:1])})
    db.define(".functor f(x: number): number\n.decl r(x: number)\n.decl s(x: number)")
    db.define("s(@f(x)) :- r(x).")
    db.insert("r", [(1,), (2,)])
    with pytest.raises(FunctorError, match=r"vectorized over 2 rows\) returned shape \(1,\)"):
        db.query("s(x)")
    db.register_functor("f", lambda x: np.where(x == 2, 0.5, 1.0), vectorized=True)
    with pytest.raises(FunctorError, match=r"`@f\(2\)` returned 0.5: expected a number"):
        db.query("s(x)")


# -- errors inside functors change nothing ----------------------------------------------


def boom(x: int) -> int:
    if x == 13:
        raise ValueError("unlucky")
    return 2 * x


def test_an_exception_in_a_functor_names_it_and_the_arguments() -> None:
    db = database(twice=boom)
    db.insert("item", [(13, "x")])
    with pytest.raises(FunctorError) as caught:
        db.query("doubled(i, d)")
    assert isinstance(caught.value, DatalogError)
    assert caught.value.message == "`@twice(13)` raised ValueError: unlucky"
    assert isinstance(caught.value.__cause__, ValueError)


@pytest.mark.parametrize("is_vectorized", [False, True])
def test_a_commit_whose_functor_raises_changes_nothing_and_subscriptions_stay_exact(
    is_vectorized: bool, tmp_path: Path
) -> None:
    fn: Any = boom
    if is_vectorized:
        fn = vectorized(lambda xs: np.array([boom(x) for x in xs.tolist()]))
    db = Database(tmp_path, functors={"twice": fn, **TAG})
    db.define(PROGRAM)
    watch = Accumulated()
    db.subscribe("doubled(i, d)", watch)
    db.insert("item", [(1, "a")])
    epoch = db.epoch
    with pytest.raises(FunctorError, match="unlucky"), db.transaction() as tx:
        tx.insert("item", [(2, "b"), (13, "x")])
        tx.retract("item", [(1, "a")])
    assert db.epoch == epoch
    assert db.query("item(i, n)") == [(1, "a")]
    assert watch.rows() == {(1, 2)}
    db.insert("item", [(3, "c")])
    db.retract("item", [(1, "a")])
    assert watch.rows() == {(3, 6)} == set(db.query("doubled(i, d)"))
    db.close()
    reopened = Database(tmp_path, functors={"twice": boom, **TAG})
    assert reopened.query("doubled(i, d)") == [(3, 6)]  # the failed commit was never logged
    reopened.close()


def test_a_definition_whose_functor_raises_on_a_live_query_changes_nothing() -> None:
    db = database(twice=boom)
    db.insert("item", [(13, "x")])
    watch = Accumulated()
    db.subscribe("tagged(i, t)", watch)
    with pytest.raises(FunctorError):
        db.define('tagged(d, "twice") :- doubled(d, _).')
    assert db.query("tagged(i, t)") == [(13, "x#13")]
    db.insert("item", [(1, "a")])
    assert watch.rows() == {(13, "x#13"), (1, "a#1")}


# -- incremental maintenance ---------------------------------------------------------


@pytest.mark.parametrize("is_vectorized", [False, True])
def test_insertions_and_retractions_reach_a_subscription_exactly(is_vectorized: bool) -> None:
    tag: Any = TAG["tag"]
    if is_vectorized:
        tag = vectorized(
            lambda s, n: np.array([f"{a}#{b}" for a, b in zip(s, n, strict=True)], dtype=object)
        )
    db = database(tag=tag)
    watch = Accumulated()
    db.subscribe("tagged(i, t), doubled(i, d)", watch)
    db.insert("item", [(1, "a"), (2, "b")])
    assert watch.changes[-1].rows == [(1, "a#1", 2), (2, "b#2", 4)]
    with db.transaction() as tx:
        tx.retract("item", [(1, "a")])
        tx.insert("item", [(1, "z"), (3, "c")])
    last = watch.changes[-1]
    assert sorted(zip(last.rows, last.diffs, strict=True)) == [
        ((1, "a#1", 2), -1),
        ((1, "z#1", 2), 1),
        ((3, "c#3", 6), 1),
    ]
    db.retract("item", [(1, "z"), (2, "b"), (3, "c")])
    assert watch.rows() == set()


# -- durability and other back ends ---------------------------------------------------


def test_a_reopened_durable_database_needs_its_functors_again(tmp_path: Path) -> None:
    with Database(tmp_path, functors={"twice": lambda x: 2 * x, **TAG}) as db:
        db.define(PROGRAM)
        db.insert("item", [(1, "a")])
    with Database(tmp_path) as reopened:
        assert reopened.query("item(i, n)") == [(1, "a")]
        with pytest.raises(UnboundFunctorError, match="bindings are not persisted"):
            reopened.query("doubled(i, d)")
    with Database(tmp_path, functors={"twice": lambda x: 2 * x}) as reopened:
        assert reopened.query("doubled(i, d)") == [(1, 2)]


def test_spark_refuses_user_functors_by_name() -> None:
    from datalog.io.spark.columns import Names, call

    term = Call("@f", (), functor=UserFunctor("f", (), "number"))
    with pytest.raises(UnsupportedError, match=r"user-defined functors \(`@f`\) are not supported"):
        call(term, Names({}), "number")
