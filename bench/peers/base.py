"""The small interface every peer of the benchmark suite implements, and the registry.

Layer: bench — may import anything public from deltalog packages and peers.
A peer loads relations (pyarrow tables with columns `c0..ck`, see `bench.ldbc`),
answers a workload with an `Answer` (its size and, for workloads with `columns`, a
digest of its rows), and, if it can, keeps that answer up to date while rows are
retracted and inserted: `incremental` is "native" (it maintains the answer),
"recompute" (it re-runs the query after each change) or "" (neither). A workload a
peer cannot express is listed in `unsupported` with the reason, which the report
shows. Peers import their system lazily, so the registry and `unavailable` cost nothing.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import sys
from abc import ABC, abstractmethod
from typing import ClassVar

import pyarrow as pa

from bench.answers import Answer
from bench.ldbc import Relations
from bench.workloads import Params, Workload

__all__ = ["PEERS", "Peer", "make_peer", "peer_class", "unavailable", "version"]

# name -> "module:Class"; `make_peer` also takes "name=module:Class" for extra peers.
PEERS = {
    "deltalog": "bench.peers.deltalog_peer:DeltalogPeer",
    "deltalog-binary": "bench.peers.deltalog_peer:DeltalogBinaryPeer",
    "duckdb": "bench.peers.duckdb_peer:DuckDBPeer",
    "kuzu": "bench.peers.kuzu_peer:KuzuPeer",
    "pathway": "bench.peers.pathway_peer:PathwayPeer",
    "pydatalog": "bench.peers.pydatalog_peer:PyDatalogPeer",
    "clingo": "bench.peers.clingo_peer:ClingoPeer",
    "pydbsp": "bench.peers.pydbsp_peer:PydbspPeer",
}


class Peer(ABC):
    """One system under measurement; one instance per subprocess."""

    name: ClassVar[str]
    module: ClassVar[str]  # the system's import name
    distribution: ClassVar[str]  # its package name, for the version
    workloads: ClassVar[frozenset[str]]
    unsupported: ClassVar[dict[str, str]] = {}  # workload -> why this peer cannot run it
    incremental: ClassVar[str] = ""
    requires: ClassVar[str] = ""  # why it may be missing, e.g. "Python >= 3.12"
    max_facts: ClassVar[int | None] = None  # larger datasets are skipped (slow peers)

    @abstractmethod
    def load(self, relations: Relations) -> None:
        """Load every relation (set semantics: duplicate rows count once)."""

    @abstractmethod
    def run(self, workload: Workload, params: Params) -> Answer:
        """The workload's answer: distinct rows over all its queries."""

    def watch(self, workload: Workload, params: Params) -> Answer:
        """Start keeping the answer of a one-query workload; return it."""
        if self.incremental != "recompute":
            raise NotImplementedError(f"{self.name} is not incremental")
        self._watched = (workload, params)
        return self.run(workload, params)

    def apply(self, relation: str, rows: pa.Table, insert: bool) -> Answer:
        """Insert (or retract) `rows` of `relation`; return the watched answer, once the
        whole effect of the change is known."""
        self.change(relation, rows, insert)
        return self.run(*self._watched)

    def change(self, relation: str, rows: pa.Table, insert: bool) -> None:
        """Insert or retract rows, for "recompute" peers."""
        raise NotImplementedError(f"{self.name} cannot change its data")

    def close(self) -> None:  # noqa: B027 - most peers hold nothing to release
        """Release what the peer holds (threads, connections); called once at the end."""


def peer_class(spec: str) -> type[Peer]:
    """The peer class of a registry name or of `name=module:Class`."""
    target = spec.partition("=")[2] or PEERS[spec]
    module, _, cls = target.partition(":")
    found = getattr(importlib.import_module(module), cls)
    assert issubclass(found, Peer)
    return found


def make_peer(spec: str) -> Peer:
    return peer_class(spec)()


def unavailable(spec: str) -> str | None:
    """None if the peer can run here, else why not (reported in the table)."""
    try:
        cls = peer_class(spec)
    except (ImportError, AttributeError, KeyError) as error:
        return f"adapter failed to import: {error}"
    if importlib.util.find_spec(cls.module) is None:
        why = f"`{cls.distribution}` not installed"
        here = f"Python {sys.version_info.major}.{sys.version_info.minor}"
        return f"{why} (needs {cls.requires}; this is {here})" if cls.requires else why
    return None


def version(spec: str) -> str:
    """The installed version of the peer's system, or "?"."""
    try:
        return importlib.metadata.version(peer_class(spec).distribution)
    except importlib.metadata.PackageNotFoundError:
        return "?"
