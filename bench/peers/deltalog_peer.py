"""Deltalog itself, through its public API, as the suite's system under test.

Layer: bench — may import anything public from deltalog packages and peers.
Answers are counted from `Database.query` (rows become Python tuples, part of the
measured time); incremental runs subscribe to the query and sum the diffs of every
`Change` (and, for checked workloads, fold its rows into the digest), so an update's
latency is its whole commit including the callback.
"""

from __future__ import annotations

from typing import ClassVar, Literal

import numpy as np
import pyarrow as pa

from bench.answers import Answer, Tally
from bench.ldbc import Relations, load_database
from bench.peers.base import Peer
from bench.workloads import WORKLOADS, Params, Workload, query_keys
from datalog import Change, Database

__all__ = ["DeltalogBinaryPeer", "DeltalogPeer"]


class DeltalogPeer(Peer):
    """Deltalog with the planner's default join plans (`plan="auto"`)."""

    name = "deltalog"
    module = "datalog"
    distribution = "deltalog"
    workloads: ClassVar[frozenset[str]] = frozenset(WORKLOADS)
    incremental = "native"
    plan: ClassVar[Literal["auto", "wcoj", "binary"]] = "auto"

    def __init__(self) -> None:
        self.db = Database()
        self.tally = Tally()
        self._defined: set[str] = set()

    def load(self, relations: Relations) -> None:
        load_database(self.db, relations)

    def _define(self, workload: Workload, params: Params) -> None:
        rules = workload.rules(params)
        if rules and rules not in self._defined:
            self.db.define(rules)
            self._defined.add(rules)

    def run(self, workload: Workload, params: Params) -> Answer:
        self._define(workload, params)
        tally = Tally(workload.columns is not None)
        for key, query in zip(query_keys(workload, params), workload.queries(params), strict=True):
            rows = self.db.query(query, plan=self.plan)
            if tally.digest_rows:
                for row in rows:
                    tally.add(key + row, 1)
            else:
                tally.size += len(rows)
        return tally.answer()

    def watch(self, workload: Workload, params: Params) -> Answer:
        self._define(workload, params)
        (query,) = workload.queries(params)
        self.tally = Tally(workload.columns is not None)
        self.db.subscribe(query, self._on_change, plan=self.plan)
        return self.tally.answer()

    def _on_change(self, change: Change) -> None:
        if self.tally.digest_rows:
            for row, diff in zip(change.rows, change.diffs, strict=True):
                self.tally.add(row, int(diff))
        else:
            self.tally.size += int(np.sum(np.asarray(change.diffs, dtype=np.int64)))

    def apply(self, relation: str, rows: pa.Table, insert: bool) -> Answer:
        with self.db.transaction() as tx:
            (tx.insert if insert else tx.retract)(relation, rows)
        return self.tally.answer()


class DeltalogBinaryPeer(DeltalogPeer):
    """Deltalog with binary joins only (`plan="binary"`), for the multiway joins."""

    name = "deltalog-binary"
    workloads: ClassVar[frozenset[str]] = frozenset({"triangles", "clique4", "star7", "bi11"})
    plan: ClassVar[Literal["auto", "wcoj", "binary"]] = "binary"
