"""What each relation depends on, summarized once per program: a digest of the
rules, subsumptive clauses and column types of everything it reads, transitively,
the functors those rules call, and whether a late input is among them.

Layer: datalog (planner). Imports the datalog language only.

A view's key (`datalog.plan.views`) must change exactly when anything that decides
its contents does. Listing the whole closure in every key made planning a chain of
`n` rules cost `n * n` (each of the `n` relations formatted and sorted the rules of
everything below it): 98 s to subscribe to the end of a 3,000-rule chain. Here each
stratum is digested once, in evaluation order, from its own rules and the digests
of the strata it reads (a Merkle digest: equal digests mean equal closures), so a
program costs one pass over its rules.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection

try:  # hashlib's own BLAKE2: importing hashlib loads OpenSSL too (3 MiB resident, ADR 0084)
    from _blake2 import blake2b
except ImportError:  # an interpreter built without it
    from hashlib import blake2b

from datalog.lang.checks import CheckedProgram
from datalog.lang.pretty import format_rule
from datalog.lang.strata import reads


class Closures:
    """Per relation of one program: `digest`, `functors` and `late` of its closure."""

    def __init__(self, program: CheckedProgram, late: Collection[str]) -> None:
        self.program = program
        self.graph = reads(program.rules)
        self.stratum_of = {r: s for s in program.strata for r in s.relations}
        self.digests: dict[str, bytes] = {}
        self.calls: dict[str, frozenset[str]] = {}
        self.reads_late: dict[str, bool] = {}
        texts: dict[str, list[str]] = defaultdict(list)
        for rule in program.rules:
            texts[rule.head.name].append(format_rule(rule))
        for stratum in program.strata:  # each reads only itself and earlier ones
            self._summarize(sorted(stratum.relations), texts, set(late))

    def digest(self, relation: str) -> bytes:
        return self.digests.get(relation) or self._base(relation)

    def functors(self, relation: str) -> frozenset[str]:
        """The functors called by the rules `relation` depends on."""
        return self.calls.get(relation, frozenset())

    def late(self, relation: str, late: Collection[str]) -> bool:
        """Whether `relation` is or depends on a late input (`deltalog.*`)."""
        return self.reads_late.get(relation, relation in late)

    def _summarize(self, members: list[str], texts: dict[str, list[str]], late: set[str]) -> None:
        inside = set(members)
        below = sorted({b for m in members for b in self.graph.get(m, ()) if b not in inside})
        h = blake2b(digest_size=16)
        calls: set[str] = set()
        for member in members:
            h.update(self._base(member))
            rules = sorted(texts.get(member, ()))
            h.update("\n".join(rules).encode() + b"\0")
            h.update(repr(self.program.dominances.get(member)).encode() + b"\0")
            calls.update(_called(rules))
        for relation in below:
            h.update(self.digest(relation))
            calls |= self.calls.get(relation, frozenset())
        digest, called = h.digest(), frozenset(calls)
        reads_late = any(self.late(b, late) for b in below) or bool(inside & late)
        for member in members:
            self.digests[member] = digest
            self.calls[member] = called
            self.reads_late[member] = reads_late

    def _base(self, relation: str) -> bytes:
        """A relation's own name, column types and semantics (a base relation's
        whole closure)."""
        info = self.program.schema.relations.get(relation)
        own = (relation, None) if info is None else (relation, info.types, info.semantics)
        return repr(own).encode() + b"\0"


def _called(rules: list[str]) -> set[str]:
    """The functor names `@name(` in rule texts."""
    found: set[str] = set()
    for text in rules:
        for part in text.split("@")[1:]:
            name = part.split("(", 1)[0]
            if name and "(" in part:
                found.add(name)
    return found
