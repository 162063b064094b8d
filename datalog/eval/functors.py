"""Binding user-defined functors (`.functor`) to Python functions.

Layer: datalog. Imports the AST, the checker's results, errors and the term
walkers. A database keeps its bindings (name -> `FunctorBinding`) apart from the
program: the program text is checked and persisted, the functions are Python
objects and are neither (a durable database reopened needs them passed again).

Binding happens when a dataflow is planned: `bind_program` gives every call in
the rules a query depends on the function currently bound to its name, and
`bind_query` does the same for the query; a call whose functor has no binding is
an `UnboundFunctorError` at its position, raised before anything is built. A
live dataflow keeps the functions it was built with (functors must be pure, so
rebinding a name to a different function affects dataflows built afterwards).
"""

from __future__ import annotations

import importlib.util
import inspect
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from os import PathLike
from pathlib import Path
from typing import Any

from datalog.lang.ast import Call, Rule, Term
from datalog.lang.checks import CheckedProgram, CheckedQuery, dependencies
from datalog.lang.errors import (
    DatalogError,
    FunctorError,
    UnboundFunctorError,
    UnsupportedError,
    raise_all,
)
from datalog.lang.passes.variables import map_term, map_terms
from datalog.lang.strata import Stratum

__all__ = [
    "FunctorBinding",
    "bind_program",
    "bind_query",
    "binding",
    "bindings",
    "functors_in_file",
    "vectorized",
]

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class FunctorBinding:
    """A Python function bound to a `.functor` name; see `datalog.eval.functor_calls` for
    how it is called (per distinct row, or `vectorized` per batch of columns)."""

    function: Callable[..., Any]
    vectorized: bool = False


def vectorized(function: Callable[..., Any]) -> FunctorBinding:
    """Mark `function` as vectorized, for `Database(functors={"f": vectorized(fn)})`."""
    return FunctorBinding(function, vectorized=True)


def binding(name: object, function: object, vectorized: bool = False) -> tuple[str, FunctorBinding]:
    """A checked (name, binding) pair: `name` with or without its `@`, `function` a
    callable or a `FunctorBinding`."""
    if not isinstance(name, str) or not _NAME.fullmatch(name.removeprefix("@")):
        raise UnsupportedError(f"a functor name is an identifier like `hash`, not {name!r}")
    if isinstance(function, FunctorBinding):
        return name.removeprefix("@"), function
    if not callable(function):
        raise UnsupportedError(f"functor `@{name}` must be bound to a callable, not {function!r}")
    return name.removeprefix("@"), FunctorBinding(function, vectorized)


def bindings(functors: Mapping[str, object] | None) -> dict[str, FunctorBinding]:
    """`Database(functors=...)` checked: name -> callable or `FunctorBinding`."""
    return dict(binding(name, fn) for name, fn in (functors or {}).items())


def functors_in_file(path: str | PathLike[str]) -> dict[str, object]:
    """The functors a Python file offers, for `deltalog run --functors FILE.py`: its
    `FUNCTORS` mapping if it has one, else every public function (or
    `vectorized(...)` binding) defined in the file itself, by its name."""
    location = Path(path)
    spec = importlib.util.spec_from_file_location(f"_deltalog_functors_{location.stem}", location)
    if spec is None or spec.loader is None or not location.is_file():
        raise UnsupportedError(f"cannot load functors from {location}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # the file's own error, reported with its name
        raise FunctorError(f"loading functors from {location} raised {exc!r}") from exc
    offered = getattr(module, "FUNCTORS", None)
    if isinstance(offered, Mapping):
        return dict(offered)
    return {
        name: value
        for name, value in vars(module).items()
        if not name.startswith("_")
        and (
            isinstance(value, FunctorBinding)
            or (inspect.isfunction(value) and value.__module__ == module.__name__)
        )
    }


def bind_program(
    program: CheckedProgram,
    functors: Mapping[str, FunctorBinding],
    relations: Iterable[str] | None = None,
) -> CheckedProgram:
    """`program` whose rules deriving `relations` and what they read (every rule when
    None) call the functions bound now; an unbound one needed is an error."""
    if not program.schema.functors:
        return program
    needed = None if relations is None else dependencies(program, relations)
    errors: list[DatalogError] = []

    def bind_rule(rule: Rule) -> Rule:
        if needed is not None and rule.head.name not in needed:
            return rule
        return _bound_rule(rule, functors, errors)

    rules = tuple(bind_rule(rule) for rule in program.rules)
    raise_all(_unique(errors))
    by_rule = dict(zip(program.rules, rules, strict=True))
    strata = tuple(
        Stratum(s.relations, tuple(by_rule[r] for r in s.rules), s.recursive)
        for s in program.strata
    )
    return replace(program, rules=rules, strata=strata)


def bind_query(query: CheckedQuery, functors: Mapping[str, FunctorBinding]) -> CheckedQuery:
    """`query` calling the functions bound now (an unbound one is an error)."""
    if not query.schema.functors:
        return query
    errors: list[DatalogError] = []
    bodies = tuple(map_terms(body, _binder(functors, errors)) for body in query.bodies)
    raise_all(_unique(errors))
    return replace(query, bodies=bodies)


def _bound_rule(
    rule: Rule, functors: Mapping[str, FunctorBinding], errors: list[DatalogError]
) -> Rule:
    bind = _binder(functors, errors)
    head = replace(rule.head, args=tuple(map_term(arg, bind) for arg in rule.head.args))
    return replace(rule, head=head, body=map_terms(rule.body, bind))


def _binder(
    functors: Mapping[str, FunctorBinding], errors: list[DatalogError]
) -> Callable[[Term], Term]:
    def bind(term: Term) -> Term:
        if not isinstance(term, Call) or term.functor is None:
            return term
        found = functors.get(term.functor.name)
        if found is None:
            errors.append(_unbound(term))
            return term
        if found.vectorized and not term.functor.params:
            message = f"functor `{term.function}` takes no arguments: bind it vectorized=False"
            errors.append(UnsupportedError(message, term.span))
            return term
        functor = replace(term.functor, function=found.function, vectorized=found.vectorized)
        return replace(term, functor=functor)

    return bind


def _unbound(call: Call) -> UnboundFunctorError:
    name = call.function[1:]
    message = (
        f"functor `{call.function}` is declared but not bound to a Python function: pass "
        f"`Database(..., functors={{{name!r}: fn}})` or call `db.register_functor({name!r}, fn)` "
        "(bindings are not persisted with a durable database)"
    )
    return UnboundFunctorError(message, call.span)


def _unique(errors: list[DatalogError]) -> list[DatalogError]:
    """One error per position (normalized copies of a rule repeat its calls)."""
    seen: dict[tuple[str, int, int], DatalogError] = {}
    for error in errors:
        seen.setdefault((error.message, error.span.line, error.span.column), error)
    return sorted(seen.values(), key=lambda e: (e.span.line, e.span.column))
