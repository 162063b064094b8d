"""The program in force and its changes: `define` adds rules, `redefine` replaces them.

Layer: datalog (API). Imports the language modules (parser, checker, printer) only:
it knows nothing of dataflows, logs or live queries.

`ProgramState` is the program a database runs now, with every definition applied
so far (in order, for checkpoints), every fact defined so far (a fact is inserted
once), and the program in force from each epoch on (`versions`, for `as_of`). A
change is computed and checked completely (`ProgramChange`) before anything
changes; the commit path (`datalog.db.epochs`) then installs it, rebuilds the live
queries that read a relation whose rules changed, and commits one epoch that
carries their differences together with the data of the same request (a
definition's facts, a transaction's rows). See the ADR
`redefine-rules-at-one-epoch`.

`redefine(relation, text)` takes rules (and subsumptive clauses) whose head is
`relation`, nothing else: facts are data (they stay in the relation across rule
changes), and declarations belong to `define`.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, fields, is_dataclass, replace
from typing import NamedTuple

from datalog.lang.ast import (
    NOWHERE,
    Component,
    Decl,
    Directive,
    FunctorDecl,
    Instance,
    Pragma,
    Program,
    Rule,
    Span,
    Subsumption,
    TypeDecl,
)
from datalog.lang.checks import CheckedProgram, check_program, check_query, dependencies
from datalog.lang.errors import DatalogError, DatalogErrors, RedefinitionError, raise_all
from datalog.lang.parser import parse_program, parse_query
from datalog.lang.passes.instantiate_components import instantiate_components
from datalog.lang.pretty import format_program

Fact = tuple[object, ...]  # (relation, *values) of a defined fact


class Definition(NamedTuple):
    """One applied program text: a `define`, or a `redefine` of `replaces`."""

    text: str
    replaces: str | None = None


@dataclass(frozen=True)
class ProgramChange:
    """A checked new program and what switching to it involves."""

    base: Program  # the database's program this change was computed from
    program: Program  # rules only: facts are data, kept in their relations
    checked: CheckedProgram
    heads: frozenset[str]  # the relations whose rules change
    definitions: tuple[Definition, ...]  # the database's definitions afterwards
    facts: tuple[Rule, ...] = ()  # facts it defines that were not defined before


class ProgramVersions:
    """The checked program in force from each epoch on, oldest first.

    A definition that adds rules is an epoch of its own (docs/adr/0014): its
    program is recorded at that epoch, so an earlier epoch is answered with the
    rules it had. Versions older than the oldest readable epoch are forgotten.
    """

    def __init__(self, epoch: int, checked: CheckedProgram) -> None:
        self.epochs = [epoch]
        self.programs = [checked]

    def record(self, epoch: int, checked: CheckedProgram, oldest: int) -> None:
        """`checked` is in force from the end of `epoch` on; forget versions that
        no epoch from `oldest` on reads."""
        if self.epochs[-1] == epoch:
            self.programs[-1] = checked
        else:
            self.epochs.append(epoch)
            self.programs.append(checked)
        first = max(0, bisect_right(self.epochs, oldest) - 1)
        del self.epochs[:first], self.programs[:first]

    def at(self, epoch: int) -> CheckedProgram:
        """The program in force at the end of `epoch` (a readable epoch)."""
        return self.programs[max(0, bisect_right(self.epochs, epoch) - 1)]


@dataclass(eq=False)
class ProgramState:
    """The program a database runs now (module docstring)."""

    program: Program
    checked: CheckedProgram
    versions: ProgramVersions
    definitions: list[Definition] = field(default_factory=list)  # applied texts, in order
    facts: set[Fact] = field(default_factory=set)  # every fact defined so far

    @classmethod
    def initial(cls, program: Program, epoch: int) -> ProgramState:
        checked = check_program(program)
        return cls(program, checked, ProgramVersions(epoch, checked))

    def install(self, change: ProgramChange) -> tuple[Program, CheckedProgram, list[Definition]]:
        """Make `change` the program in force; what to `restore` if it does not happen."""
        before = self.program, self.checked, self.definitions
        self.program, self.checked = change.program, change.checked
        self.definitions = list(change.definitions)
        return before

    def restore(self, before: tuple[Program, CheckedProgram, list[Definition]]) -> None:
        self.program, self.checked, self.definitions = before

    def committed(self, change: ProgramChange, epoch: int, oldest: int) -> None:
        """`change` is in force from `epoch` on: its facts are defined now (those a
        restored snapshot holds already included)."""
        self.facts.update(fact_key(f) for f in change.checked.facts)
        self.versions.record(epoch, change.checked, oldest)

    def reads(self, query_text: str) -> set[str]:
        """The relations the query `query_text` reads, directly or through rules."""
        from datalog.plan.passes import relations_read

        checked = check_query(parse_query(query_text), self.checked.schema)
        return dependencies(self.checked, relations_read(checked))


# --- define --------------------------------------------------------------------------


def defined(state: ProgramState, text: str) -> ProgramChange:
    """`state`'s program extended by the declarations, facts and rules of `text`,
    checked as a whole; its `facts` are those not defined before."""
    parsed = parse_program(text)
    merged = state.program.extended(parsed)
    checked = _checked(merged, state.program)
    # what the new text adds, its `.init`s expanded (they may add rules anywhere)
    parsed = instantiate_components(replace(parsed, components=merged.components))
    facts = tuple(f for f in checked.facts if fact_key(f) not in state.facts)
    heads = _heads(parsed.rules, parsed.subsumptions)
    definitions = (*state.definitions, Definition(text))
    return ProgramChange(state.program, _rules_only(merged), checked, heads, definitions, facts)


def _rules_only(program: Program) -> Program:
    """Facts live in their relations: the program keeps only rules, so a later
    definition re-checks the rules, not every fact ever defined."""
    return replace(program, rules=tuple(r for r in program.rules if r.body))


def _heads(rules: Iterable[Rule], subsumptions: Iterable[Subsumption]) -> frozenset[str]:
    """The relations that `rules` (not facts) and subsumptive clauses define."""
    defined = {r.head.name for r in rules if r.body}
    return frozenset(defined | {s.dominated.name for s in subsumptions})


def fact_key(fact: Rule) -> Fact:
    return (fact.head.name, *(arg.value for arg in fact.head.args))  # type: ignore[union-attr]


def fact_rows(facts: Iterable[Rule]) -> dict[str, list[tuple[object, ...]]]:
    """Facts as rows by relation, in order."""
    rows: dict[str, list[tuple[object, ...]]] = {}
    for fact in facts:
        rows.setdefault(fact.head.name, []).append(fact_key(fact)[1:])
    return rows


# --- redefine ------------------------------------------------------------------------


def unchanged(state: ProgramState) -> ProgramChange:
    """The program in force, as a change of nothing (to build changes on)."""
    program, checked = state.program, state.checked
    return ProgramChange(program, program, checked, frozenset(), tuple(state.definitions))


def redefined(start: ProgramChange, relation: str, text: str) -> ProgramChange:
    """`start` with every rule and subsumptive clause of `relation` replaced by those
    of `text` (which may be empty), checked as a whole program."""
    start.checked.schema.require(relation)  # unknown: an error with a did-you-mean
    parsed = parse_program(text)
    raise_all(_misplaced(parsed, relation, text))
    if relation not in {d.name for d in start.program.decls}:
        message = (
            f"`{relation}` belongs to a component instance: its rules come from the "
            "component's body, so `redefine` cannot replace them"
        )
        raise RedefinitionError(message, parsed.rules[0].span if parsed.rules else NOWHERE, text)
    program = replace(
        start.program,
        rules=tuple(r for r in start.program.rules if r.head.name != relation) + parsed.rules,
        subsumptions=tuple(s for s in start.program.subsumptions if s.dominated.name != relation)
        + parsed.subsumptions,
        source=text,
    )
    checked = _checked(program, start.program)
    definitions = (*start.definitions, Definition(text, relation))
    return ProgramChange(start.base, program, checked, start.heads | {relation}, definitions)


def redefined_all(state: ProgramState, replacements: Sequence[tuple[str, str]]) -> ProgramChange:
    """The program in force with each (relation, text) replacement applied in order."""
    change = unchanged(state)
    for relation, text in replacements:
        change = redefined(change, relation, text)
    return change


def _misplaced(parsed: Program, relation: str, text: str) -> list[RedefinitionError]:
    """What a redefinition of `relation` may not hold: anything but its rules."""
    errors = []
    others: list[Pragma | TypeDecl | FunctorDecl | Decl | Directive | Component | Instance] = [
        *parsed.pragmas, *parsed.types, *parsed.functors, *parsed.decls, *parsed.directives,
        *parsed.components, *parsed.instances,
    ]  # fmt: skip
    for item in others:
        message = (
            f"`redefine` replaces the rules of `{relation}` and takes nothing else: "
            "declarations, types, functors, components, directives and pragmas go to "
            "`define`"
        )
        errors.append(RedefinitionError(message, item.span, text))
    for rule in parsed.rules:
        name = rule.head.name
        if rule.is_fact:
            message = (
                f"`{name}(...)` is a fact: facts are data and stay in their relation "
                "across a redefinition; insert or retract it instead (in the same "
                "transaction as the redefinition, to change both at one epoch)"
            )
            errors.append(RedefinitionError(message, rule.span, text))
        elif name != relation:
            message = f"this rule defines `{name}`, but `redefine` replaces `{relation}` only"
            errors.append(RedefinitionError(message, rule.head.span, text))
    for clause in parsed.subsumptions:
        if clause.dominated.name != relation:
            name = clause.dominated.name
            message = f"this clause subsumes `{name}`, but `redefine` replaces `{relation}` only"
            errors.append(RedefinitionError(message, clause.span, text))
    return sorted(errors, key=lambda e: (e.span.line, e.span.column))


def _checked(program: Program, old: Program) -> CheckedProgram:
    """`check_program`. An error found at a rule of an earlier text (a negation of an
    old rule that a new rule closes a cycle through, say) keeps its message but loses
    its position: that refers to the earlier text, not the one being defined."""
    try:
        return check_program(program)
    except DatalogError as error:
        raise _unplaced(error, _span_ids((old.rules, old.subsumptions), set())) from None


def _unplaced(error: DatalogError, old: set[int]) -> DatalogError:
    if isinstance(error, DatalogErrors):
        return DatalogErrors([_unplaced(e, old) for e in error.errors])
    if id(error.span) not in old:
        return error
    clone = type(error).__new__(type(error))
    clone.__dict__.update(error.__dict__)
    clone.span = NOWHERE
    Exception.__init__(clone, clone.format())
    return clone


def _span_ids(node: object, found: set[int]) -> set[int]:
    """The identities of the `Span`s in an AST (the parser makes one per node)."""
    if isinstance(node, Span):
        if node is not NOWHERE:
            found.add(id(node))
    elif isinstance(node, tuple):
        for item in node:
            _span_ids(item, found)
    elif is_dataclass(node):
        for item in fields(node):
            _span_ids(getattr(node, item.name), found)
    return found


# --- what a checkpoint writes ----------------------------------------------------------


def program_text(definitions: Sequence[Definition]) -> str:
    """One program text equivalent to `definitions` applied in order: each
    redefinition drops the rules of its relation from the texts before it (each
    such text is parsed once and printed again; facts and declarations stay)."""
    texts: list[str] = []
    edited: dict[int, Program] = {}
    for definition in definitions:
        if definition.replaces is not None:
            for i, text in enumerate(texts):
                if definition.replaces in text:  # else it holds no rule for it
                    program = edited[i] if i in edited else parse_program(text)
                    edited[i] = _without_rules(program, definition.replaces)
        texts.append(definition.text)
    return "\n".join(format_program(edited[i]) if i in edited else t for i, t in enumerate(texts))


def _without_rules(program: Program, relation: str) -> Program:
    return replace(
        program,
        rules=tuple(r for r in program.rules if r.is_fact or r.head.name != relation),
        subsumptions=tuple(s for s in program.subsumptions if s.dominated.name != relation),
    )
