"""The model of a database: its program, its base facts, its epoch and its past.

Answers come from the reference evaluator (`datalog.eval.reference`), never from the
engine. A `Snapshot` is the database at the end of one epoch: the program in
force (declarations and rules, as lines) and the facts of every relation. A
`ModelState` is the current snapshot, the epoch, the snapshots of the epochs the
database keeps readable (`history`), and what `define` has seen (facts defined
once are not inserted again by a later definition). Operations return a new
model (`defined`, `redefined`, `written`, `advanced`); the test applies it only
once it knows the database did the same.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any

from datalog import DatalogError, parse_program, parse_query
from datalog.eval import reference
from datalog.eval.functors import bind_program, bind_query, bindings
from datalog.lang.checks import CheckedProgram, check_program, check_query
from tests.datalog.model.pool import BASE_DECLS, Fragment, Redefinition, mix

Row = tuple[Any, ...]
Facts = Mapping[str, frozenset[Row]]
Op = tuple[bool, str, tuple[Row, ...]]  # (inserting?, relation, rows)

# The reference calls `mix` unhooked: it must never meet an injected fault.
REFERENCE_FUNCTORS = bindings({"mix": mix})


@dataclass(frozen=True)
class Snapshot:
    """The database at the end of an epoch: program lines and facts per relation."""

    decls: tuple[str, ...]
    rules: tuple[tuple[str, tuple[str, ...]], ...]  # (relation, its rules), in order
    facts: tuple[tuple[str, frozenset[Row]], ...]  # non-empty relations, sorted

    @property
    def text(self) -> str:
        lines = [*self.decls, *(r for _, rules in self.rules for r in rules)]
        return "\n".join(lines) + "\n"

    def fact_map(self) -> dict[str, frozenset[Row]]:
        return dict(self.facts)

    def rules_of(self, relation: str) -> tuple[str, ...]:
        return dict(self.rules).get(relation, ())

    def with_rules(self, relation: str, rules: Sequence[str]) -> Snapshot:
        table = dict(self.rules)
        table[relation] = tuple(rules)
        return replace(self, rules=tuple((r, tuple(v)) for r, v in table.items() if v))

    def with_facts(self, facts: Mapping[str, Iterable[Row]]) -> Snapshot:
        kept = ((name, frozenset(rows)) for name, rows in facts.items())
        return replace(self, facts=tuple(sorted((n, r) for n, r in kept if r)))

    def relations(self) -> dict[str, tuple[str, ...]]:
        """Every declared relation and its column types."""
        return _types(self.text)

    def answer(self, query: str) -> frozenset[Row]:
        """The reference answer of `query` (its rows) on this snapshot."""
        return _answer(self.text, self.facts, query)

    def holds(self, relation: str) -> frozenset[Row]:
        return _evaluated(self.text, self.facts).get(relation, frozenset())


def empty_snapshot() -> Snapshot:
    return Snapshot(BASE_DECLS, (), ())


@lru_cache(maxsize=256)
def checked(text: str) -> CheckedProgram:
    """The program checked and its functor bound (raises `DatalogError` if invalid)."""
    return bind_program(check_program(parse_program(text)), REFERENCE_FUNCTORS)


@lru_cache(maxsize=256)
def _types(text: str) -> dict[str, tuple[str, ...]]:
    schema = checked(text).schema
    return {name: tuple(info.types) for name, info in schema.relations.items()}


@lru_cache(maxsize=512)
def _evaluated(
    text: str, facts: tuple[tuple[str, frozenset[Row]], ...]
) -> dict[str, frozenset[Row]]:
    relations = reference.evaluate(checked(text), dict(facts))
    return {name: frozenset(rows) for name, rows in relations.items()}


@lru_cache(maxsize=4096)
def _answer(text: str, facts: tuple[tuple[str, frozenset[Row]], ...], query: str) -> frozenset[Row]:
    program = checked(text)
    bound = bind_query(check_query(parse_query(query), program.schema), REFERENCE_FUNCTORS)
    relations = {name: set(rows) for name, rows in _evaluated(text, facts).items()}
    return frozenset(reference.answer(bound, relations))


def valid(text: str) -> bool:
    try:
        checked(text)
    except DatalogError:
        return False
    return True


def apply_ops(facts: Mapping[str, frozenset[Row]], ops: Iterable[Op]) -> dict[str, frozenset[Row]]:
    """Set semantics, in order: inserting a present row or retracting an absent one
    changes nothing."""
    out = {name: set(rows) for name, rows in facts.items()}
    for inserting, relation, rows in ops:
        target = out.setdefault(relation, set())
        if inserting:
            target.update(rows)
        else:
            target.difference_update(rows)
    return {name: frozenset(rows) for name, rows in out.items()}


@dataclass(frozen=True)
class ModelState:
    """The database as the model sees it (see the module docstring)."""

    current: Snapshot = field(default_factory=empty_snapshot)
    epoch: int = 1  # a new database has committed its first (internal) epoch
    past: tuple[tuple[int, Snapshot], ...] = ((1, empty_snapshot()),)
    history: int | None = None  # Database(history=...)
    floor: int = 1  # the oldest epoch a reopened database can read (its snapshot's)
    defined_facts: frozenset[tuple[str, Row]] = frozenset()
    generated: int = 0  # programs drawn so far (their relations are renamed apart)

    # -- what it holds ----------------------------------------------------------------

    @property
    def relations(self) -> dict[str, tuple[str, ...]]:
        return self.current.relations()

    def derived(self) -> list[str]:
        return sorted({r for r, _ in self.current.rules})

    def facts(self) -> dict[str, frozenset[Row]]:
        return self.current.fact_map()

    @property
    def oldest(self) -> int:
        """The oldest readable epoch (`Engine.oldest_readable`)."""
        if self.history is None:
            return self.floor
        return max(self.floor, self.epoch - max(self.history, 1) + 1)

    def at(self, epoch: int) -> Snapshot:
        return dict(self.past)[epoch]

    # -- operations: each returns the model after it, or None if it is rejected ----------

    def defined(self, fragment: Fragment) -> tuple[ModelState, bool] | None:
        """After `define(fragment.text)`, and whether it takes an epoch (rules, or facts
        never defined before); None if the checker rejects the program."""
        snapshot = replace(self.current, decls=(*self.current.decls, *fragment.decls))
        for rule in fragment.rules:
            head = rule.split("(")[0].strip()
            snapshot = snapshot.with_rules(head, (*snapshot.rules_of(head), rule))
        if not valid(snapshot.text):
            return None
        new = [f for f in _fact_rows(snapshot.text, fragment.facts) if f not in self.defined_facts]
        ops = [(True, relation, (row,)) for relation, row in new]
        snapshot = snapshot.with_facts(apply_ops(self.facts(), ops))
        generated = self.generated + fragment.name.startswith("generated")
        model = replace(
            self, current=snapshot, defined_facts=self.defined_facts | set(new), generated=generated
        )
        return model, bool(fragment.rules or new)

    def redefined(self, change: Redefinition, ops: Sequence[Op] = ()) -> ModelState | None:
        """After a transaction replacing `change.relation`'s rules (and writing `ops`)."""
        if any(rule.split("(")[0].strip() != change.relation for rule in change.rules):
            return None
        if change.relation not in self.relations:
            return None
        snapshot = self.current.with_rules(change.relation, change.rules)
        if not valid(snapshot.text):
            return None
        return replace(self, current=snapshot.with_facts(apply_ops(self.facts(), ops)))

    def written(self, ops: Sequence[Op]) -> ModelState:
        return replace(self, current=self.current.with_facts(apply_ops(self.facts(), ops)))

    def advanced(self) -> ModelState:
        """The current snapshot becomes the next epoch's; epochs no longer readable go."""
        moved = replace(self, epoch=self.epoch + 1)
        past = ((e, s) for e, s in (*self.past, (moved.epoch, self.current)) if e >= moved.oldest)
        return replace(moved, past=tuple(past))

    def restamped(self) -> ModelState:
        """A definition that took no epoch still changes the current epoch's program."""
        past = tuple((e, s) for e, s in self.past if e != self.epoch)
        return replace(self, past=(*past, (self.epoch, self.current)))

    def reopened(self, floor: int) -> ModelState:
        """After a reopen whose snapshot was taken at `floor` (the model cannot know
        when the last automatic checkpoint happened; the test checks it is a past
        epoch). The facts a reopened database remembers as defined are those of the
        definitions it replayed, which the model keeps as they were."""
        kept = replace(self, floor=max(self.floor, floor))
        return replace(kept, past=tuple((e, s) for e, s in self.past if e >= kept.oldest))


def _fact_rows(text: str, facts: Sequence[str]) -> list[tuple[str, Row]]:
    """The (relation, row) of each program fact, typed by the program's declarations."""
    if not facts:
        return []
    program = check_program(parse_program(text + "\n".join(facts) + "\n"))
    solver = reference.Solver({}, program.schema, {}, {})
    out = []
    for fact in program.facts:
        row = solver.head_row(fact.head, {})
        assert row is not None
        out.append((fact.head.name, row))
    return out
