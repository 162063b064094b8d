"""Where a component name used in a `.init` or as a base component resolves.

Layer: datalog. Imports only the AST. Soufflé's lookup: a name used inside a
component is searched among the components declared in that component, then in
those of its base components, then in the enclosing component and so outwards
up to the top level. A type parameter is replaced by its argument first (once,
not transitively): a component may be passed to another as a type argument.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from datalog.lang.ast import Component

Binding = Mapping[str, str]  # type parameter -> its argument


def bind(binding: Binding, params: Sequence[str], args: Sequence[str]) -> dict[str, str]:
    """The binding inside a component with `params` given `args` in the scope of
    `binding`. Fresh, as in Soufflé: a component's body sees its own parameters,
    not those of the component it is declared in."""
    return {param: binding.get(arg, arg) for param, arg in zip(params, args, strict=True)}


class Scopes:
    """The components of a program, each with the component it is declared in."""

    def __init__(self, components: Sequence[Component]) -> None:
        self.top: dict[str, Component] = {}
        self._enclosing: dict[int, Component | None] = {}
        for component in components:
            self.top.setdefault(component.name, component)
        self._enclose(components, None)

    def _enclose(self, components: Iterable[Component], outer: Component | None) -> None:
        for component in components:
            self._enclosing[id(component)] = outer
            self._enclose(component.body.components, component)

    def enclosing(self, component: Component) -> Component | None:
        """The component `component` is declared in (None: the top level)."""
        return self._enclosing.get(id(component))

    def find(self, scope: Component | None, name: str, binding: Binding) -> Component | None:
        """The component `name` means inside `scope` (None: the top level)."""
        bound = binding.get(name, name)
        while scope is not None:
            found = self._declared_in(scope, bound, binding, set())
            if found is not None:
                return found
            scope = self.enclosing(scope)
        return self.top.get(bound)

    def _declared_in(
        self, scope: Component, name: str, binding: Binding, seen: set[int]
    ) -> Component | None:
        """A component named `name` declared in `scope` or in one of its bases."""
        if id(scope) in seen:
            return None  # inheritance in a cycle (reported elsewhere)
        seen.add(id(scope))
        for component in scope.body.components:
            if component.name == name:
                return component
        for base in scope.bases:
            parent = self.find(self.enclosing(scope), base.name, binding)
            found = None if parent is None else self._declared_in(parent, name, binding, seen)
            if found is not None:
                return found
        return None

    def visible(self, scope: Component | None) -> list[str]:
        """The component names visible in `scope` (for "did you mean")."""
        names: list[str] = []
        while scope is not None:
            names += [c.name for c in scope.body.components]
            scope = self.enclosing(scope)
        return names + list(self.top)
