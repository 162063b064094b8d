"""Pathway, an incremental dataflow framework (Rust engine, Python API): static and live.

Layer: bench — may import anything public from deltalog packages and peers.
The workloads are Pathway tables (`bench.peers.pathway_queries`).

- `run` (initial evaluation): every relation is a static table
  (`pw.debug.table_from_pandas`) and the answer is computed once with
  `pw.debug.table_to_pandas`.
- `watch` / `apply` (updates): one Pathway computation stays up (`pw.run` in a
  thread). The stream relation is fed by a `pw.io.python.ConnectorSubject` whose
  schema's primary key is the whole row plus a marker column `mk`, so `next` inserts
  a row and `delete` retracts exactly it; the other relations are static tables. Each
  change is pushed, then a marker row (`mk = n`) and a commit, so the change and its
  marker get the same Pathway time. The answer (its rows, or its one-row count) and
  the marker rows are concatenated into one output table observed by
  `pw.io.subscribe`: its `on_time_end` fires once all output changes of a time have
  been delivered, so when marker `n`'s time has ended the whole effect of change `n`
  is in the tally. The latency is from the push until then.
"""

from __future__ import annotations

import queue
import threading
from typing import Any, ClassVar

import pyarrow as pa

from bench.answers import Answer, Tally
from bench.ldbc import Relations
from bench.peers.base import Peer
from bench.workloads import Params, Workload

__all__ = ["PathwayPeer"]

WAIT_S = 0.5  # how often a waiting `apply` checks that Pathway is still running
Command = tuple[str, list[tuple[Any, ...]]]


def _subject_class() -> Any:
    import pathway as pw

    class Feed(pw.io.python.ConnectorSubject):
        """Rows pushed from the benchmark thread: ("insert" | "delete" | "commit", rows)."""

        def __init__(self, columns: list[str]) -> None:
            super().__init__()
            self.columns = columns
            self.commands: queue.Queue[Command | None] = queue.Queue()

        @property
        def _deletions_enabled(self) -> bool:
            return True

        def run(self) -> None:
            while (command := self.commands.get()) is not None:
                op, rows = command
                if op == "commit":
                    self.commit()
                    continue
                send = self.next if op == "insert" else self.delete
                for row in rows:
                    send(**dict(zip(self.columns, row, strict=True)))

    return Feed


class PathwayPeer(Peer):
    name = "pathway"
    module = "pathway"
    distribution = "pathway"
    workloads: ClassVar[frozenset[str]] = frozenset(
        {"reach", "tc", "triangles", "clique4", "star7", "bi11", "bi2", "is1", "is2", "is3"}
    )
    incremental = "native"

    def __init__(self) -> None:
        from pathway.internals.parse_graph import G

        G.clear()  # one computation per peer, even when a process makes several
        self._relations: Relations = {}
        self._thread: threading.Thread | None = None
        self._feed: Any = None
        self._failure: BaseException | None = None
        self._ended = threading.Condition()
        self._done: set[int] = set()
        self._pending: list[int] = []
        self._marker = 0
        self._blank: tuple[Any, ...] = ()
        self.tally = Tally()

    def load(self, relations: Relations) -> None:
        self._relations = {name: _distinct_rows(table) for name, table in relations.items()}

    def _static(self, name: str) -> Any:
        import pathway as pw

        return pw.debug.table_from_pandas(self._relations[name].to_pandas())

    def run(self, workload: Workload, params: Params) -> Answer:
        import pathway as pw

        from bench.peers.pathway_queries import ANSWERS, COUNTED

        tables = {name: self._static(name) for name in self._relations}
        answer = ANSWERS[workload.name](tables, params)
        if workload.name in COUNTED:
            frame = pw.debug.table_to_pandas(answer.reduce(n=pw.reducers.count()))
            return Answer(int(frame["n"].iloc[0]) if len(frame) else 0)
        frame = pw.debug.table_to_pandas(answer)
        return Answer.of(frame.itertuples(index=False, name=None), workload.columns is not None)

    # -- streaming ------------------------------------------------------------------

    def watch(self, workload: Workload, params: Params) -> Answer:
        import pathway as pw

        from bench.peers.pathway_queries import ANSWERS, COUNTED

        assert workload.stream is not None
        stream = self._relations[workload.stream]
        columns = stream.column_names
        types = [int if pa.types.is_integer(f.type) else str for f in stream.schema]
        schema = pw.schema_builder(
            {c: pw.column_definition(dtype=t, primary_key=True) for c, t in
             zip([*columns, "mk"], [*types, int], strict=True)}
        )  # fmt: skip
        self._blank = tuple(0 if t is int else "" for t in types)
        self._feed = _subject_class()([*columns, "mk"])
        fed = pw.io.python.read(self._feed, schema=schema, autocommit_duration_ms=None)
        tables = {name: self._static(name) for name in self._relations if name != workload.stream}
        tables[workload.stream] = fed.filter(fed.mk == 0).select(*(pw.this[c] for c in columns))
        answer = ANSWERS[workload.name](tables, params)
        counted = workload.name in COUNTED
        if counted:
            answer = answer.reduce(n=pw.reducers.count())
        self.tally = Tally(workload.columns is not None)
        names = answer.column_names()
        markers = fed.filter(fed.mk > 0)
        blank = {c: 0 if _is_int(answer, c) else "" for c in names}
        out = answer.select(*(answer[c] for c in names), mk=0).concat_reindex(
            markers.select(**blank, mk=markers.mk)
        )

        def on_change(key: Any, row: dict[str, Any], time: int, is_addition: bool) -> None:
            if row["mk"]:
                if is_addition:
                    self._pending.append(int(row["mk"]))
            elif counted:
                self.tally.size += row["n"] if is_addition else -row["n"]
            else:
                self.tally.add(tuple(row[c] for c in names), 1 if is_addition else -1)

        def on_time_end(time: int) -> None:
            with self._ended:
                self._done.update(self._pending)
                self._pending.clear()
                self._ended.notify_all()

        pw.io.subscribe(out, on_change=on_change, on_time_end=on_time_end)
        self._thread = threading.Thread(target=self._run_pathway, name="pathway", daemon=True)
        self._thread.start()
        rows = list(zip(*(stream.column(c).to_pylist() for c in columns), strict=True))
        return self._push("insert", rows)

    def _run_pathway(self) -> None:
        import pathway as pw

        try:
            pw.run(monitoring_level=pw.MonitoringLevel.NONE)
        except BaseException as error:  # reported by the waiting `apply`
            self._failure = error
        finally:
            with self._ended:
                self._ended.notify_all()

    def _push(self, op: str, rows: list[tuple[Any, ...]]) -> Answer:
        """Send `rows`, a marker and a commit; wait until the marker's time has ended."""
        self._marker += 1
        marker = self._marker
        self._feed.commands.put((op, [(*row, 0) for row in rows]))
        self._feed.commands.put(("insert", [(*self._blank, marker)]))
        self._feed.commands.put(("commit", []))
        with self._ended:
            while marker not in self._done:
                if self._failure is not None or not (self._thread and self._thread.is_alive()):
                    raise RuntimeError(f"pathway stopped: {self._failure!r}")
                self._ended.wait(WAIT_S)
        return self.tally.answer()

    def apply(self, relation: str, rows: pa.Table, insert: bool) -> Answer:
        values = list(zip(*(rows.column(c).to_pylist() for c in rows.column_names), strict=True))
        return self._push("insert" if insert else "delete", values)

    def close(self) -> None:
        if self._feed is not None:
            self._feed.commands.put(None)
        if self._thread is not None:
            self._thread.join(timeout=30)


def _distinct_rows(table: pa.Table) -> pa.Table:
    """`table` without duplicate rows (Pathway tables are multisets)."""
    return table.group_by(table.column_names).aggregate([])


def _is_int(table: Any, column: str) -> bool:
    return bool(table.schema.typehints()[column] is int)
