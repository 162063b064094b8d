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

from collections.abc import Iterable, Iterator, Mapping

from datalog.lang.ast import Component, ComponentType, Decl, Program, Span
from datalog.lang.errors import (
    ArityError,
    ComponentError,
    DatalogError,
    DuplicateDeclarationError,
    UnknownNameError,
    did_you_mean,
)
from datalog.lang.passes.component_scopes import Scopes


def check_components(program: Program, scopes: Scopes) -> list[DatalogError]:
    """Every error of the program's component declarations and `.init`s."""
    checker = _Checker(scopes, _all_components(program.components))
    checker.scope(program, None)
    for override in program.overrides:
        message = "`.override` belongs in a component's body, after `.comp Name : Base {`"
        checker.report(ComponentError, message, override.span)
    return checker.errors


def _all_components(components: Iterable[Component]) -> list[Component]:
    found: list[Component] = []
    pending = list(components)
    while pending:
        component = pending.pop()
        found.append(component)
        pending.extend(component.body.components)
    return found


class _Checker:
    def __init__(self, scopes: Scopes, components: list[Component]) -> None:
        self.scopes = scopes
        self.errors: list[DatalogError] = []
        self.components = components
        self._cyclic: set[int] | None = None

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
        if id(component) not in self.cyclic():
            return
        for base in component.bases:
            parent = self._parent(component, base)
            if parent is None:
                continue
            path = self._path(parent, component)
            if path is not None:
                cycle = " -> ".join((component.name, *path))
                message = f"component `{component.name}` inherits from itself ({cycle})"
                self.report(ComponentError, message, base.span)
                return

    def _path(self, start: Component, target: Component) -> list[str] | None:
        """The names from `start` up its bases to `target`, if it inherits from it
        (depth first, bases in order; iterative, each component entered once)."""
        stack: list[tuple[Component, Iterator[ComponentType]]] = [(start, iter(start.bases))]
        seen = {id(start)}
        while stack:
            current, bases = stack[-1]
            if current is target:
                return [c.name for c, _ in stack]
            base = next(bases, None)
            if base is None:
                stack.pop()
                continue
            parent = self._parent(current, base)
            if parent is not None and (parent is target or id(parent) not in seen):
                seen.add(id(parent))
                stack.append((parent, iter(parent.bases)))
        return None

    def cyclic(self) -> set[int]:
        """The components that inherit from themselves: those of a strongly connected
        component of the inheritance graph with more than one member or a loop
        (Tarjan's algorithm, iterative), found once."""
        if self._cyclic is None:
            self._cyclic = set()
            self._tarjan()
        return self._cyclic

    def _tarjan(self) -> None:
        assert self._cyclic is not None
        index: dict[int, int] = {}
        low: dict[int, int] = {}
        members: list[Component] = []
        on_stack: set[int] = set()
        for root in self.components:
            if id(root) in index:
                continue
            work = [(root, iter(self._parents(root)))]
            index[id(root)] = low[id(root)] = len(index)
            members.append(root)
            on_stack.add(id(root))
            while work:
                node, parents = work[-1]
                parent = next(parents, None)
                if parent is not None and id(parent) not in index:
                    index[id(parent)] = low[id(parent)] = len(index)
                    members.append(parent)
                    on_stack.add(id(parent))
                    work.append((parent, iter(self._parents(parent))))
                    continue
                if parent is not None:
                    if id(parent) in on_stack:
                        low[id(node)] = min(low[id(node)], index[id(parent)])
                    continue
                work.pop()
                if work:
                    above = work[-1][0]
                    low[id(above)] = min(low[id(above)], low[id(node)])
                if low[id(node)] == index[id(node)]:
                    self._strong_component(node, members, on_stack)

    def _strong_component(
        self, head: Component, members: list[Component], on_stack: set[int]
    ) -> None:
        assert self._cyclic is not None
        found: list[Component] = []
        while True:
            member = members.pop()
            on_stack.discard(id(member))
            found.append(member)
            if member is head:
                break
        if len(found) > 1 or any(p is head for p in self._parents(head)):
            self._cyclic.update(id(member) for member in found)

    def _parents(self, component: Component) -> list[Component]:
        found = (self._parent(component, base) for base in component.bases)
        return [parent for parent in found if parent is not None]

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
