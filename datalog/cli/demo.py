"""The built-in example behind `deltalog demo`: a social graph kept up to date.

Layer: datalog (front end). Uses only the public API, the fact-file sources
and the display helpers of `datalog.cli.display`.

It defines `examples/social.dl` (recursion, negation, an aggregate), loads
`examples/facts/*.facts`, answers a few queries, subscribes to two of them and
then commits insertions and retractions, printing what each subscriber is told
at every epoch, and ends with `explain` and `stats` summaries.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from datalog import Change, Database
from datalog.cli.display import (
    answer_columns,
    change_lines,
    format_answer,
    format_row,
    stats_summary,
)
from datalog.io.sources.csv import load_inputs
from datalog.lang.system import is_reserved

QUERIES = (
    'reach("alice", who)',
    'suggest("alice", who)',
    "followers(p, n), n >= 2",
)
WATCHED = ('suggest("alice", who)', "followers(p, n)")

# (what happens, insertions, retractions), one transaction each.
Rows = dict[str, list[tuple[Any, ...]]]
STEPS: tuple[tuple[str, Rows, Rows], ...] = (
    ("dave follows erin", {"follows": [("dave", "erin")]}, {}),
    ("erin blocks alice", {"blocks": [("erin", "alice")]}, {}),
    (
        "alice unfollows bob and follows carol",
        {"follows": [("alice", "carol")]},
        {"follows": [("alice", "bob")]},
    ),
    ("carol unfollows dave", {}, {"follows": [("carol", "dave")]}),
)


def demo(examples: Path) -> Database:
    """Run the whole example, printing as it goes; returns the database."""
    program = examples / "social.dl"
    db = Database()
    db.define(program.read_text(encoding="utf-8"))
    rules = sum(1 for rule in db.program.rules if rule.body)
    relations = sum(1 for name in db.checked.schema if not is_reserved(name))
    _title(f"Program {program.name}: {relations} relations, {rules} rules")
    loaded = load_inputs(db, examples / "facts", progress=False)
    counts = ", ".join(f"{name} {n}" for name, n in loaded.items())
    print(f"loaded facts from {examples.name}/facts/*.facts: {counts} (epoch {db.epoch})")

    _title("Queries")
    for query in QUERIES:
        _print_query(db, query)

    _title("Subscriptions")
    for query in WATCHED:
        db.subscribe(query, _printer(query))

    for what, inserted, retracted in STEPS:
        _title(f"Transaction: {what}")
        _commit(db, inserted, retracted)

    _title('Explain suggest("alice", who)')
    print(db.explain('suggest("alice", who)'))
    _title("Stats")
    for line in stats_summary(db.stats()):
        print(line)
    return db


def _title(text: str) -> None:
    print(f"\n== {text}")


def _print_query(db: Database, query: str) -> None:
    print(f"?- {query}")
    for line in format_answer(answer_columns(db, query), db.query(query)):
        print(f"   {line}")


def _printer(query: str) -> Callable[[Change], None]:
    return lambda change: _print_change(query, change)


def _print_change(query: str, change: Change) -> None:
    if change.snapshot:
        n = len(change.rows)
        print(f"subscribed to {query} at epoch {change.epoch}: {n} row{'' if n == 1 else 's'}")
        return
    print(f"{query} changed at epoch {change.epoch}:")
    for line in change_lines(change):
        print(f"   {line}")


def _commit(db: Database, inserted: Rows, retracted: Rows) -> None:
    for verb, parts in (("insert", inserted), ("retract", retracted)):
        for relation, rows in parts.items():
            print(f"{verb} {relation} {' '.join(format_row(r) for r in rows)}")
    with db.transaction() as tx:
        for relation, rows in retracted.items():
            tx.retract(relation, rows)
        for relation, rows in inserted.items():
            tx.insert(relation, rows)
