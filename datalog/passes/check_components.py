"""Checks of component declarations, instantiated or not (as Soufflé checks them).

Layer: datalog. Imports the AST, errors and `component_scopes`. Reports what is
wrong with a `.comp` whatever it is instantiated with: unknown base components,
wrong numbers of type arguments, inheritance in a cycle, `.override`s that do not
override an inherited `overridable` relation, duplicate component or instance
names in one scope, and statements a component cannot hold. A reference through
a type parameter is checked when the component is instantiated instead
(`instantiate_components`).
"""

from __future__ import annotations

from collections.abc import Mapping

from datalog.ast import Component, ComponentType, Decl, Program, Span
from datalog.errors import (
    ArityError,
    ComponentError,
    DatalogError,
    DuplicateDeclarationError,
    UnknownNameError,
    did_you_mean,
)
from datalog.passes.component_scopes import Scopes


def check_components(program: Program, scopes: Scopes) -> list[DatalogError]:
    """Every error of the program's component declarations and `.init`s."""
    checker = _Checker(scopes)
    checker.scope(program, None)
    for override in program.overrides:
        message = "`.override` belongs in a component's body, after `.comp Name : Base {`"
        checker.report(ComponentError, message, override.span)
    return checker.errors


class _Checker:
    def __init__(self, scopes: Scopes) -> None:
        self.scopes = scopes
        self.errors: list[DatalogError] = []

    def report(self, kind: type[DatalogError], message: str, span: Span) -> None:
        self.errors.append(kind(message, span))

    def scope(self, body: Program, owner: Component | None) -> None:
        """The components and instances declared in `body` (`owner`'s, or the top level)."""
        self._unique("component", [(c.name, c.span) for c in body.components])
        self._unique("instance", [(i.name, i.span) for i in body.instances])
        params = owner.params if owner is not None else ()
        for instance in body.instances:
            if instance.component.name not in params:
                self.reference(instance.component, owner)
        for component in body.components:
            self.component(component, owner)
            self.scope(component.body, component)

    def component(self, component: Component, owner: Component | None) -> None:
        for base in component.bases:
            if base.name not in component.params:
                self.reference(base, owner)
        self._cycle(component)
        self._overrides(component)
        for pragma in component.body.pragmas:
            message = "`.pragma` is not allowed in a component; write it at the top level"
            self.report(ComponentError, message, pragma.span)
        for functor in component.body.functors:
            message = "`.functor` is not allowed in a component; declare it at the top level"
            self.report(ComponentError, message, functor.span)

    def reference(self, used: ComponentType, scope: Component | None) -> Component | None:
        """The component `used` names in `scope`, or None (reported)."""
        return resolve(self.scopes, used, scope, {}, self.errors)

    def _unique(self, kind: str, names: list[tuple[str, Span]]) -> None:
        first: dict[str, Span] = {}
        for name, span in names:
            if name in first:
                where = f" (first declared at line {first[name].line})" if first[name].line else ""
                self.report(
                    DuplicateDeclarationError, f"{kind} `{name}` is declared twice{where}", span
                )
            first.setdefault(name, span)

    def _cycle(self, component: Component) -> None:
        """Report `component` if it inherits from itself, naming the cycle."""
        for base in component.bases:
            parent = self._parent(component, base)
            if parent is None:
                continue
            path = self._path(parent, component, (component.name, parent.name), set())
            if path is not None:
                cycle = " -> ".join(path)
                message = f"component `{component.name}` inherits from itself ({cycle})"
                self.report(ComponentError, message, base.span)
                return

    def _path(
        self, current: Component, target: Component, path: tuple[str, ...], seen: set[int]
    ) -> tuple[str, ...] | None:
        """The names from `current` up its bases to `target`, if it inherits from it."""
        if current is target:
            return path
        for base in current.bases:
            parent = self._parent(current, base)
            if parent is not None and id(parent) not in seen:
                seen.add(id(parent))
                found = self._path(parent, target, (*path, parent.name), seen)
                if found is not None:
                    return found
        return None

    def _parent(self, component: Component, base: ComponentType) -> Component | None:
        """The base component `base` names, None if it is a type parameter or unknown."""
        if base.name in component.params:
            return None
        return self.scopes.find(self.scopes.enclosing(component), base.name, {})

    def _ancestors(self, component: Component) -> list[Component]:
        """Every base component, direct or not, that is not a type parameter."""
        found: list[Component] = []
        pending, seen = [component], {id(component)}
        while pending:
            current = pending.pop(0)
            for base in current.bases:
                parent = self._parent(current, base)
                if parent is not None and id(parent) not in seen:
                    seen.add(id(parent))
                    found.append(parent)
                    pending.append(parent)
        return found

    def _overrides(self, component: Component) -> None:
        if not component.body.overrides:
            return
        inherited: dict[str, tuple[Decl, Component]] = {}
        for parent in self._ancestors(component):
            for decl in parent.body.decls:
                inherited.setdefault(decl.name, (decl, parent))
        own = {decl.name for decl in component.body.decls}
        opaque = any(
            b.name in c.params for c in (component, *self._ancestors(component)) for b in c.bases
        )
        for override in component.body.overrides:
            name = override.relation
            intro = f"`.override {name}` in component `{component.name}`"
            if name in own:
                message = f"{intro}: `{name}` is declared in `{component.name}` itself"
                self.report(ComponentError, f"{message}, not inherited", override.span)
            elif name in inherited:
                decl, parent = inherited[name]
                if "overridable" not in decl.qualifiers:
                    message = f"{intro}: `{name}` of `{parent.name}` is not declared `overridable`"
                    self.report(ComponentError, message, override.span)
            elif not opaque:
                message = f"{intro}: no base component declares `{name}`"
                self.report(ComponentError, message, override.span)


def resolve(
    scopes: Scopes,
    used: ComponentType,
    scope: Component | None,
    binding: Mapping[str, str],
    errors: list[DatalogError],
) -> Component | None:
    """The component `used` names in `scope` under `binding`, or None after
    appending why not (unknown, or a wrong number of type arguments) to `errors`."""
    found = scopes.find(scope, used.name, binding)
    name = binding.get(used.name, used.name)
    shown = f"`{name}` (passed as `{used.name}`)" if name != used.name else f"`{name}`"
    if found is None:
        hint = did_you_mean(name, scopes.visible(scope))
        errors.append(UnknownNameError(f"unknown component {shown}{hint}", used.span))
        return None
    if len(found.params) != len(used.args):
        wanted = len(found.params)
        takes = f"{wanted} type argument{'' if wanted == 1 else 's'}"
        params = f" (<{', '.join(found.params)}>)" if found.params else ""
        message = f"component {shown} takes {takes}{params}, not {len(used.args)}"
        errors.append(ArityError(message, used.span))
        return None
    return found
