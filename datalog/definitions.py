"""Program changes: adding rules (`define`) and replacing a relation's rules (`redefine`).

Layer: datalog (API). Imports the language modules (parser, checker, printer), the
durable log, the live queries, `datalog.transaction` (to convert a definition's
facts) and `differential.dataflow`; `Database` and `Transaction` call it.

A change is checked completely before anything changes (`ProgramChange`). `switch`
then installs the new program, rebuilds every live query that reads a relation
whose rules changed and *holds* the difference between its new answer and the one
its subscribers have, and commits one new epoch that carries the held differences
together with the data of the same request (a definition's facts, a transaction's
rows): subscribers receive exactly old-to-new, labelled with that epoch. Any
failure restores the old program and rebuilds what it touched, so nothing is
delivered and nothing changes. See the ADR `redefine-rules-at-one-epoch`.

`redefine(relation, text)` takes rules (and subsumptive clauses) whose head is
`relation`, nothing else: facts are data (they stay in the relation across rule
changes), and declarations belong to `define`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, fields, is_dataclass, replace
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from datalog import durable
from datalog.ast import (
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
from datalog.checks import CheckedProgram, check_program, dependencies
from datalog.errors import DatalogError, DatalogErrors, RedefinitionError, raise_all
from datalog.live import LiveQuery
from datalog.parser import parse_program, parse_query
from datalog.passes.instantiate_components import instantiate_components
from datalog.pretty import format_program
from differential.dataflow import unbudgeted

if TYPE_CHECKING:
    from datalog.database import Database


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


# --- define --------------------------------------------------------------------------


def define(db: Database, text: str, facts: bool) -> None:
    """`Database.define`; without `facts`, its facts are not inserted (a snapshot
    holds them) and its rules take no epoch (a snapshot is being restored)."""
    db._refuse_in_callback("define")
    parsed = parse_program(text)
    merged = db.program.extended(parsed)
    checked = _checked(merged, db.program)
    # what the new text adds, its `.init`s expanded (they may add rules anywhere)
    parsed = instantiate_components(replace(parsed, components=merged.components))
    new_facts = [f for f in checked.facts if fact_key(f) not in db._facts] if facts else []
    heads = _heads(parsed.rules, parsed.subsumptions)
    change = ProgramChange(
        db.program, _rules_only(merged), checked, heads, (*db.definitions, Definition(text))
    )
    db._checkpoint_if_due()
    end, epoch = durable.mark(db), db.engine.epoch
    try:
        durable.log_define(db, text)
        switch(db, change, lambda: _commit_facts(db, new_facts, new_epoch=bool(heads) and facts))
    except BaseException:
        if db.engine.epoch == epoch:  # it did not happen: nothing of it stays
            durable.undo(db, end)
            raise
        _defined(db, checked)  # it happened; what failed after is raised
        raise
    _defined(db, checked)
    if db.engine.epoch > epoch:
        db._tick(db.engine.epoch)


def _defined(db: Database, checked: CheckedProgram) -> None:
    db._facts.update(fact_key(f) for f in checked.facts)


def _rules_only(program: Program) -> Program:
    """Facts live in their relations: the program keeps only rules, so a later
    definition re-checks the rules, not every fact ever defined."""
    return replace(program, rules=tuple(r for r in program.rules if r.body))


def _heads(rules: Iterable[Rule], subsumptions: Iterable[Subsumption]) -> frozenset[str]:
    """The relations that `rules` (not facts) and subsumptive clauses define."""
    defined = {r.head.name for r in rules if r.body}
    return frozenset(defined | {s.dominated.name for s in subsumptions})


def _commit_facts(db: Database, facts: list[Rule], new_epoch: bool) -> int:
    """Commit a definition's facts (and a new epoch even without any, if asked)."""
    from datalog.transaction import Transaction

    if not facts:
        return db.engine.commit({}) if new_epoch else db.engine.epoch
    tx, epoch = Transaction(db), db.engine.epoch
    try:
        for fact in facts:
            tx.insert(fact.head.name, [tuple(arg.value for arg in fact.head.args)])  # type: ignore[union-attr]
        return db.engine.commit(tx.requests())
    except BaseException:
        if db.engine.epoch == epoch:  # did not happen: its symbols are forgotten
            tx.discard()
        raise


def fact_key(fact: Rule) -> tuple[object, ...]:
    return (fact.head.name, *(arg.value for arg in fact.head.args))  # type: ignore[union-attr]


# --- redefine ------------------------------------------------------------------------


def unchanged(db: Database) -> ProgramChange:
    """The database's program, as a change of nothing (to build changes on)."""
    return ProgramChange(db.program, db.program, db.checked, frozenset(), tuple(db.definitions))


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


def redefined_all(db: Database, replacements: Sequence[tuple[str, str]]) -> ProgramChange:
    """The database's program with each (relation, text) replacement applied in order."""
    change = unchanged(db)
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


# --- switching -----------------------------------------------------------------------


def switch(db: Database, change: ProgramChange, commit: Callable[[], int]) -> int:
    """Install `change`, hold each affected live query's difference, and `commit`
    (which advances the epoch, or not for a change that touches no rules); the
    held differences reach subscribers labelled with the committed epoch. All or
    nothing: on any failure the old program is back and every live query exact."""
    before = db.program, db.checked, db.definitions
    start = db.engine.epoch
    created = [r for r in change.checked.schema if r not in db.engine.inputs]
    lives: list[LiveQuery] = []
    db.program, db.checked = change.program, change.checked
    db.definitions = list(change.definitions)
    try:
        _create_inputs(db, created)
        lives = affected(db, change.heads)
        for live in lives:  # the changes new rules cause wait for their epoch
            live.held = db._rebuild(live)
        epoch = commit()
    except BaseException:
        if db.engine.epoch == start:  # nothing happened: the old program is back
            db.program, db.checked, db.definitions = before
            _repair(db, lives)
            for name in created:
                db.engine.remove_input(name)
            raise
        db._restart_live()  # the epoch happened, then something failed: finish it
        _switched(db, change, lives, db.engine.epoch)
        raise
    _switched(db, change, lives, epoch)
    return epoch


def _switched(db: Database, change: ProgramChange, lives: list[LiveQuery], epoch: int) -> None:
    """After the new program's epoch: record it, deliver the held differences."""
    db.programs.record(db.engine.epoch, change.checked, db.engine.oldest_readable())
    for live in lives:  # every dataflow delivers at each epoch, carrying the held
        if live.held is not None:  # change along; this one took no epoch (a restore)
            db._deliver(live, live.state.empty(), epoch)
    with unbudgeted():  # the change is done: this only moves work into shared views
        db._share_views()


def _create_inputs(db: Database, names: Iterable[str]) -> None:
    from datalog.expressions import DTYPES

    for name in names:
        info = db.checked.schema[name]
        # a nullary relation is stored with one constant column
        dtypes = [np.dtype(DTYPES[t]) for t in info.types] or [np.dtype(np.int64)]
        db.engine.create_input(info.name, dtypes, info.semantics)


def affected(db: Database, heads: frozenset[str]) -> list[LiveQuery]:
    """The live queries that read (transitively) a relation in `heads`.

    Whether a query reaches a relation does not depend on that relation's own rules,
    so the old and the new program agree on it."""
    if not heads:
        return []
    return [live for live in db.live.values() if heads & reads(db, live.query_text)]


def reads(db: Database, query_text: str) -> set[str]:
    """The relations the query `query_text` reads, directly or through rules."""
    from datalog.checks import check_query
    from datalog.plan.build import _relations_read

    checked = check_query(parse_query(query_text), db.checked.schema)
    return dependencies(db.checked, _relations_read(checked))


def _repair(db: Database, touched: list[LiveQuery]) -> None:
    """After a failed switch (the old program back): rebuild the live queries it
    rebuilt, and any whose dataflow a failed commit dropped. Their inputs are as
    before, so each new answer equals what its subscribers hold: nothing to deliver."""
    with unbudgeted():  # a repair: it must finish whatever budget the change had
        for live in list(db.live.values()):
            live.held = None
            if live in touched or live.plan.dataflow not in db.engine.dataflows:
                db._rebuild(live)


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
