"""Answers as the suite cross-checks them: a row count and an order-free content digest.

Layer: bench — may import anything public from deltalog packages and peers.
Counting rows is enough for workloads whose answer is a large set (reachability,
triangles), but a top-k query returns k rows whatever it gets wrong. For workloads
with `Workload.columns`, every peer therefore also reports a digest of its rows: the
sum, modulo 2**64, of a 64-bit hash of each row times its multiplicity. Being a sum,
it is kept up to date from `(row, diff)` changes as cheaply as the count, and equal
answers give equal digests whatever the order in which systems produce rows. Rows
are normalised first (numpy integers become `int`, everything else `str`), so DuckDB,
pandas and Deltalog tuples of the same values hash alike.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["Answer", "Tally", "digest", "row_hash"]

MOD = 1 << 64


def _norm(value: object) -> object:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return int(value)
    if hasattr(value, "item") and hasattr(value, "dtype"):  # numpy scalars
        return _norm(value.item())
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return str(value)


def row_hash(row: Iterable[object]) -> int:
    """A 64-bit hash of the normalised values of `row` (stable across processes)."""
    text = repr(tuple(_norm(v) for v in row)).encode("utf-8")
    return int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "little")


def digest(rows: Iterable[Iterable[object]]) -> int:
    """The digest of a set of rows (each counted once per occurrence)."""
    return sum(row_hash(r) for r in rows) % MOD


@dataclass
class Tally:
    """A running answer: row count and digest, updated from (row, diff) changes.

    `digest_rows` False skips hashing (workloads checked by count only).
    """

    digest_rows: bool = False
    size: int = 0
    total: int = 0

    def add(self, row: Iterable[object], diff: int) -> None:
        self.size += diff
        if self.digest_rows:
            self.total = (self.total + diff * row_hash(row)) % MOD

    def answer(self) -> Answer:
        return Answer(self.size, self.total if self.digest_rows else None)


@dataclass(frozen=True)
class Answer:
    """What a peer reports: the number of distinct rows and, if checked, their digest."""

    size: int
    digest: int | None = None

    @staticmethod
    def of(rows: Iterable[Iterable[object]], digest_rows: bool) -> Answer:
        tally = Tally(digest_rows)
        for row in rows:
            tally.add(row, 1)
        return tally.answer()
