"""Stratification: the dependency graph of a program, its SCCs and their order.

Layer: datalog. Imports the AST, errors and the checker's variable walkers.
A rule makes its head depend on every atom of its body; the edge is *negative*
when the atom is negated or sits inside an aggregate (the head needs the whole
relation, not just some tuples). Strongly connected components (iterative
Tarjan) in topological order, dependencies first, are the strata; a negative
edge inside a component is negation (or aggregation) through recursion, and the
error names the cycle. Relations without rules (base relations, facts only) need
no stratum.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Literal as Lit

from datalog.lang.ast import Atom, Negation, Rule, Span
from datalog.lang.errors import StratificationError
from datalog.lang.passes.variables import aggregates_in, literal_terms, nodes

EdgeKind = Lit["positive", "negation", "aggregation"]


@dataclass(frozen=True)
class Stratum:
    """Relations evaluated together, with the rules deriving them.

    `recursive` when some relation of the stratum depends on itself; strata are
    ordered so that every stratum reads only itself and earlier ones.
    """

    relations: frozenset[str]
    rules: tuple[Rule, ...]
    recursive: bool


@dataclass(frozen=True)
class Edge:
    """`head` reads `body` through an atom at `span`."""

    head: str
    body: str
    kind: EdgeKind
    span: Span


def dependency_edges(rules: Iterable[Rule]) -> Iterator[Edge]:
    """Every edge of the dependency graph, in program order."""
    for rule in rules:
        head = rule.head.name
        for literal in rule.body:
            if isinstance(literal, Atom):
                yield Edge(head, literal.name, "positive", literal.span)
            elif isinstance(literal, Negation):
                yield Edge(head, literal.atom.name, "negation", literal.atom.span)
            for term in literal_terms(literal):
                for aggregate in aggregates_in(term):
                    target = () if aggregate.target is None else (aggregate.target,)
                    for node in nodes(target, aggregate.body):
                        if isinstance(node, Atom):
                            yield Edge(head, node.name, "aggregation", node.span)


def strongly_connected_components(graph: dict[str, list[str]]) -> list[list[str]]:
    """Tarjan's SCCs of `graph` (node -> successors), each after all it reaches."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work: list[tuple[str, int]] = [(root, 0)]
        while work:
            node, position = work.pop()
            if position == 0:
                index[node] = low[node] = len(index)
                stack.append(node)
                on_stack.add(node)
            successors = graph.get(node, [])
            if position < len(successors):
                work.append((node, position + 1))
                successor = successors[position]
                if successor not in index:
                    work.append((successor, 0))
                elif successor in on_stack:
                    low[node] = min(low[node], index[successor])
                continue
            if low[node] == index[node]:
                components.append(_pop_component(node, stack, on_stack))
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
    return components


def _pop_component(node: str, stack: list[str], on_stack: set[str]) -> list[str]:
    component: list[str] = []
    while True:
        member = stack.pop()
        on_stack.discard(member)
        component.append(member)
        if member == node:
            return component[::-1]


def stratify(
    rules: Sequence[Rule], source: str = "", subsumed: Iterable[str] = ()
) -> tuple[tuple[Stratum, ...], list[StratificationError]]:
    """The strata of `rules` in evaluation order, and the stratification errors.
    The `subsumed` relations are derived (have a stratum) even without rules."""
    edges = list(dependency_edges(rules))
    graph: dict[str, list[str]] = {name: [] for name in subsumed}
    for rule in rules:
        graph.setdefault(rule.head.name, [])
    for edge in edges:
        graph.setdefault(edge.head, [])
        if edge.body not in graph[edge.head]:
            graph[edge.head].append(edge.body)
        graph.setdefault(edge.body, [])
    components = strongly_connected_components(graph)
    component_of = {name: i for i, members in enumerate(components) for name in members}
    heads = {rule.head.name for rule in rules} | set(subsumed)
    by_component: dict[int, list[Rule]] = {}
    for rule in rules:
        by_component.setdefault(component_of[rule.head.name], []).append(rule)
    strata = []
    for i, members in enumerate(components):
        if not heads.intersection(members):
            continue
        recursive = len(members) > 1 or members[0] in graph[members[0]]
        chosen = tuple(by_component.get(i, ()))  # in program order
        strata.append(Stratum(frozenset(members), chosen, recursive))
    errors = _negative_cycles(edges, graph, component_of, source)
    return tuple(strata), errors


def _negative_cycles(
    edges: list[Edge], graph: dict[str, list[str]], component_of: dict[str, int], source: str
) -> list[StratificationError]:
    errors: list[StratificationError] = []
    seen: set[tuple[str, str, str]] = set()
    for edge in edges:
        key = (edge.head, edge.body, edge.kind)
        if edge.kind == "positive" or key in seen:
            continue
        if component_of[edge.head] != component_of[edge.body]:
            continue
        seen.add(key)
        path = _path(graph, edge.body, edge.head, component_of)
        message = _cycle_message(edge, path)
        errors.append(StratificationError(message, edge.span, source))
    return errors


def _path(
    graph: dict[str, list[str]], start: str, goal: str, component_of: dict[str, int]
) -> list[str]:
    """A shortest path start -> ... -> goal inside one component (BFS)."""
    previous: dict[str, str | None] = {start: None}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        if node == goal:
            break
        for successor in graph[node]:
            if successor not in previous and component_of[successor] == component_of[start]:
                previous[successor] = node
                queue.append(successor)
    path: list[str] = []
    cursor: str | None = goal
    while cursor is not None:
        path.append(cursor)
        cursor = previous[cursor]
    return path[::-1]


def _cycle_message(edge: Edge, path: list[str]) -> str:
    head, body = edge.head, edge.body
    what = "negation" if edge.kind == "negation" else "aggregation"
    verb = "depends negatively on" if edge.kind == "negation" else "aggregates over"
    if head == body:
        return f"{what} through recursion: `{head}` {verb} itself (cycle {head} -> {head})"
    cycle = " -> ".join([head, *path])
    return (
        f"{what} through recursion: `{head}` {verb} `{body}`, "
        f"and `{body}` depends on `{head}` (cycle {cycle})"
    )


def reads(rules: Iterable[Rule]) -> dict[str, set[str]]:
    """Relation -> the relations its rules read directly."""
    graph: dict[str, set[str]] = {}
    for edge in dependency_edges(rules):
        graph.setdefault(edge.head, set()).add(edge.body)
    return graph
