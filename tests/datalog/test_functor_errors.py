"""A functor's failure is reported at its call, with the line and a caret, however
long after the text was parsed it runs (a commit, a subscription); and what it
returns must be a value: a str with a lone surrogate is none."""

from __future__ import annotations

import numpy as np
import pytest

from datalog import Database
from datalog.eval.functors import vectorized
from datalog.lang.errors import FunctorError

PROGRAM = """
.functor f(x: number): number
.functor g(x: number): symbol
.functor h(x: number): symbol
.decl r(x: number)
.decl q(x: number)
.decl s(x: symbol)
q(y) :- r(x), y = @f(x).
s(y) :- r(x), y = @g(x).
"""


def boom(x: int) -> int:
    if x > 1:
        raise ValueError("too big")
    return x


def test_a_functor_raising_in_a_commit_shows_its_call_with_a_caret() -> None:
    """The error named line and column but showed no line: the rule's text was gone."""
    db = Database(functors={"f": boom, "g": str, "h": str})
    db.define(PROGRAM)
    db.subscribe("q(y)", lambda change: None)
    with pytest.raises(FunctorError) as caught:
        db.insert("r", [(5,)])
    error = caught.value
    assert (error.line, error.column) == (8, 19)
    assert str(error).endswith("\n    q(y) :- r(x), y = @f(x).\n                      ^^^^^")
    assert db.query("r(x)") == []


def test_a_functor_raising_in_a_query_shows_the_query_line() -> None:
    db = Database(functors={"f": boom, "g": str, "h": str})
    db.define(PROGRAM + "r(7).")
    with pytest.raises(FunctorError) as caught:
        db.query("r(x), y = @f(x)")
    assert str(caught.value).endswith("\n    r(x), y = @f(x)\n              ^^^^^")


@pytest.mark.parametrize(
    ("functors", "query"),
    [
        ({"g": lambda x: "a\ud800"}, "s(y)"),
        ({"h": vectorized(lambda x: np.array(["ok"] * (len(x) - 1) + ["b\udc00"]))},
         "r(x), y = @h(x)"),
        ({"h": vectorized(lambda x: ["ok"] * (len(x) - 1) + ["\udfff"])}, "r(x), y = @h(x)"),
    ],
)  # fmt: skip
def test_a_functor_returning_a_lone_surrogate_is_an_error_not_a_unicode_error(
    functors: dict[str, object], query: str
) -> None:
    db = Database(functors={"f": boom, "g": str, "h": str, **functors})
    db.define(PROGRAM + "r(1). r(0).")
    with pytest.raises(FunctorError, match="a lone surrogate is not a character") as caught:
        db.query(query)
    assert caught.value.line >= 1
