"""Pass: expand Soufflé components into plain declarations, rules and directives.

Layer: datalog. Imports the AST, errors and the other component passes. Runs
before every other check (`datalog.lang.checks.check_program`), since instantiation
is purely syntactic, as in Soufflé: `.init g = Graph<number>` copies the body of
`Graph`, after the bodies of its base components and what the `.init`s in them
produce, with each type parameter replaced by its argument; then every relation
and type the copy declares is renamed `g.name`, in declarations, directives and
every atom. A name the copy does not declare is left as it is: it belongs to the
enclosing scope (renamed in turn if that is a component being instantiated), so
a component may give rules to relations outside it. `.override r` in a component
drops the rules and facts its bases give `r`.

Nodes keep their spans, so an error in an instantiated rule points into the
`.comp` body; spans of a component declared by an earlier `define` name its text.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, is_dataclass, replace
from typing import Any, NamedTuple, TypeVar

from datalog.lang.ast import (
    Atom,
    Cast,
    Component,
    Decl,
    Directive,
    Instance,
    Program,
    Rule,
    Span,
    Subsumption,
    TypeDecl,
)
from datalog.lang.errors import ComponentError, DatalogError, ordered_errors, raise_all
from datalog.lang.nesting import MAX_COMPONENT_NESTING
from datalog.lang.passes.check_components import check_components, resolve
from datalog.lang.passes.component_scopes import Binding, Scopes, bind
from differential.dataflow import check_budget

_Node = TypeVar("_Node")


def instantiate_components(program: Program) -> Program:
    """`program` with every `.init` expanded and none left; raises every component
    error together. A program without components is returned as it is."""
    if not (program.components or program.instances or program.overrides):
        return program
    components = tuple(_in_own_text(c, program.source) for c in program.components)
    program = replace(program, components=components)
    scopes = Scopes(program.components)
    expander = _Expander(scopes)
    content = _Content()
    for instance in program.instances:
        content.add(expander.instantiate(instance, None, {}, ()))
    errors = check_components(program, scopes) + expander.errors
    raise_all(ordered_errors(errors, program.source))
    return replace(
        program,
        types=program.types + tuple(content.types),
        decls=program.decls + tuple(content.decls),
        directives=program.directives + tuple(content.directives),
        rules=program.rules + tuple(content.rules),
        subsumptions=program.subsumptions + tuple(content.subsumptions),
        instances=(),
    )


@dataclass
class _Content:
    """What instantiating a component produced so far."""

    types: list[TypeDecl] = field(default_factory=list)
    decls: list[Decl] = field(default_factory=list)
    directives: list[Directive] = field(default_factory=list)
    rules: list[Rule] = field(default_factory=list)
    subsumptions: list[Subsumption] = field(default_factory=list)

    def add(self, other: _Content) -> None:
        for item in fields(self):
            getattr(self, item.name).extend(getattr(other, item.name))

    def add_body(self, body: Program, binding: Binding, overridden: frozenset[str]) -> None:
        """A component's own statements, its type parameters replaced by `binding`;
        the rules of relations in `overridden` are left out."""

        def bound(name: str) -> str:
            return binding.get(name, name)

        self.types += [_renamed_type(t, bound) for t in body.types]
        self.decls += [_retyped(d, bound) for d in body.decls]
        self.directives += body.directives
        kept = [r for r in body.rules if r.head.name not in overridden]
        self.rules += [_rebuilt(rule, _casts_to(bound)) for rule in kept]
        clauses = [s for s in body.subsumptions if s.dominated.name not in overridden]
        self.subsumptions += [_rebuilt(clause, _casts_to(bound)) for clause in clauses]

    def prefixed(self, prefix: str) -> _Content:
        """The content of instance `prefix`: what it declares is renamed `prefix.name`."""
        types = {t.name: f"{prefix}.{t.name}" for t in self.types}
        relations = {d.name: f"{prefix}.{d.name}" for d in self.decls}

        def type_name(name: str) -> str:
            return types.get(name, name)

        def atoms(node: Any) -> Any:
            if isinstance(node, Atom) and node.name in relations:
                return replace(node, name=relations[node.name])
            return _casts_to(type_name)(node)

        return _Content(
            types=[_renamed_type(t, type_name) for t in self.types],
            decls=[replace(_retyped(d, type_name), name=relations[d.name]) for d in self.decls],
            directives=[
                replace(d, relation=relations.get(d.relation, d.relation)) for d in self.directives
            ],
            rules=[_rebuilt(rule, atoms) for rule in self.rules],
            subsumptions=[_rebuilt(clause, atoms) for clause in self.subsumptions],
        )


class _Step(NamedTuple):
    """One component being expanded: instantiated (`.init name = ...`) or inherited."""

    key: tuple[str, int, frozenset[tuple[str, str]]]
    name: str  # the instance's name; "" when inherited


# The most component instances one program may expand to: `.init`s of components
# holding two `.init`s of the next one make 2**n instances out of n lines.
MAX_INSTANCES = 10_000


class _Expander:
    def __init__(self, scopes: Scopes) -> None:
        self.scopes = scopes
        self.errors: list[DatalogError] = []
        self.instances = 0

    def instantiate(
        self, instance: Instance, scope: Component | None, binding: Binding, path: tuple[_Step, ...]
    ) -> _Content:
        """The content of `.init instance` written in `scope` (None: the top level)."""
        self._count(instance, path)
        component = resolve(self.scopes, instance.component, scope, binding, self.errors)
        if component is None:
            return _Content()
        active = bind(binding, component.params, instance.component.args)
        step = _Step(("init", id(component), frozenset(active.items())), instance.name)
        if any(s.key == step.key for s in path):
            chain = ".".join(s.name for s in (*path, step) if s.name)
            name = component.name
            message = f"component `{name}` is instantiated inside itself without end"
            again = f"`{chain}` would be another `{name}`"
            self.errors.append(ComponentError(f"{message}: {again}", instance.span))
            return _Content()
        content = _Content()
        for nested in component.body.instances:
            content.add(self.instantiate(nested, component, active, (*path, step)))
        self.collect(component, active, frozenset(), content, (*path, step))
        return content.prefixed(instance.name)

    def _count(self, instance: Instance, path: tuple[_Step, ...]) -> None:
        """One more instance: refused past `MAX_INSTANCES`, or `MAX_COMPONENT_NESTING`
        deep (the expansion recurses once per level); the budget is checked."""
        check_budget()
        self.instances += 1
        if self.instances > MAX_INSTANCES:
            message = f"the components expand to more than {MAX_INSTANCES} instances"
            raise ComponentError(
                f"{message}: `.init {instance.name}` is one too many", instance.span
            )
        if len(path) >= MAX_COMPONENT_NESTING:
            deep = f"more than {MAX_COMPONENT_NESTING} levels deep here"
            raise ComponentError(f"components are instantiated {deep}", instance.span)

    def collect(
        self,
        component: Component,
        binding: Binding,
        overridden: frozenset[str],
        content: _Content,
        path: tuple[_Step, ...],
    ) -> None:
        """Add `component`'s statements to `content`, after those of its bases, whose
        rules for a relation of `overridden` or of its own `.override`s are left out."""
        inherited = overridden | {o.relation for o in component.body.overrides}
        enclosing = self.scopes.enclosing(component)
        for base in component.bases:
            parent = resolve(self.scopes, base, enclosing, binding, self.errors)
            if parent is None:
                continue
            if len(path) >= MAX_COMPONENT_NESTING:
                message = f"components inherit more than {MAX_COMPONENT_NESTING} levels deep here"
                raise ComponentError(message, base.span)
            active = bind(binding, parent.params, base.args)
            step = _Step(("base", id(parent), frozenset(active.items())), "")
            if any(s.key == step.key for s in path):
                if base.name in binding:  # else reported with its cycle by check_components
                    message = (
                        f"component `{parent.name}` inherits from itself through `{base.name}`"
                    )
                    self.errors.append(ComponentError(message, base.span))
                continue
            for nested in parent.body.instances:
                content.add(self.instantiate(nested, parent, active, (*path, step)))
            self.collect(parent, active, inherited, content, (*path, step))
        content.add_body(component.body, binding, overridden)


def _casts_to(rename: Callable[[str], str]) -> Callable[[Any], Any]:
    """A change renaming the type of every `as(x, T)` (a parameter or an own type)."""

    def change(node: Any) -> Any:
        if isinstance(node, Cast) and node.kind is None:
            return replace(node, type=rename(node.type))
        return node

    return change


def _renamed_type(decl: TypeDecl, rename: Callable[[str], str]) -> TypeDecl:
    return replace(decl, name=rename(decl.name), bases=tuple(rename(b) for b in decl.bases))


def _retyped(decl: Decl, rename: Callable[[str], str]) -> Decl:
    columns = tuple(replace(c, type=rename(c.type)) for c in decl.columns)
    return replace(decl, columns=columns)


def _in_own_text(component: Component, source: str) -> Component:
    """`component` with spans that name its text, if another text declared it."""
    text = component.body.source
    if not text or text == source:
        return component
    return _rebuilt(component, lambda n: replace(n, source=text) if isinstance(n, Span) else n)


def _rebuilt(node: _Node, change: Callable[[Any], Any]) -> _Node:
    """`node` with `change` applied to every AST node inside it, bottom-up."""
    if isinstance(node, tuple):
        return tuple(_rebuilt(item, change) for item in node)  # type: ignore[return-value]
    if not is_dataclass(node) or isinstance(node, type):
        return node
    parts: Mapping[str, Any] = {
        f.name: _rebuilt(getattr(node, f.name), change) for f in fields(node)
    }
    return change(replace(node, **parts))
