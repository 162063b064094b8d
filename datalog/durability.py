"""Durability: an append-only log of definitions and committed transactions.

Layer: datalog (API). Imports the standard library and numpy.

`Database(path)` keeps `path/log.jsonl`: one JSON object per line, either
`{"define": text}` or `{"epoch": e, "changes": [{"relation", "insert",
"columns"}]}` with values as JSON (symbols as strings). A record is written
(and fsynced) after its commit succeeded and before the call returns, so every
epoch a caller saw committed survives a restart. Opening replays the log
through the ordinary API: the program is re-checked and every transaction
re-applied in order, which reproduces the same epochs. A torn last line (a
crash in the middle of a write) is ignored.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from datalog.database import Database

_log = logging.getLogger("deltalog")
LOG_NAME = "log.jsonl"


def _rows_or_columns(db: Database, change: dict[str, Any]) -> Any:
    """A logged change's data: columns, or the `()` rows of a nullary relation."""
    if db.checked.schema.types(change["relation"]):
        return [np.asarray(c) for c in change["columns"]]
    return [tuple(row) for row in change["columns"]]


class Log:
    """The log file of a durable database."""

    def __init__(self, path: str | os.PathLike[str], sync: bool = True) -> None:
        self.dir = Path(path)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.file = self.dir / LOG_NAME
        self.sync = sync
        self._out: IO[str] | None = None

    def records(self) -> Iterator[dict[str, Any]]:
        """The records written so far, in order (a torn last line is skipped)."""
        if not self.file.exists():
            return
        lines = self.file.read_text(encoding="utf-8").splitlines(keepends=True)
        for n, line in enumerate(lines):
            try:
                yield json.loads(line)
            except json.JSONDecodeError:
                if n != len(lines) - 1:
                    raise
                _log.warning("dropping a torn last record of %s", self.file)
                self.file.write_text("".join(lines[:-1]), encoding="utf-8")

    def replay(self, db: Database) -> None:
        """Re-apply every record to a fresh database."""
        for record in self.records():
            if "define" in record:
                db.define(record["define"])
                continue
            with db.transaction() as tx:
                for change in record["changes"]:
                    columns = _rows_or_columns(db, change)
                    if change["insert"]:
                        tx.insert(change["relation"], columns)
                    else:
                        tx.retract(change["relation"], columns)
            if db.epoch != record["epoch"]:
                raise RuntimeError(f"replay reached epoch {db.epoch}, log says {record['epoch']}")

    def write_define(self, text: str) -> None:
        self._write({"define": text})

    def write_commit(
        self, epoch: int, changes: Sequence[tuple[str, bool, list[list[Any]]]]
    ) -> None:
        records = [{"relation": r, "insert": ins, "columns": cols} for r, ins, cols in changes]
        self._write({"epoch": epoch, "changes": records})

    def _write(self, record: dict[str, Any]) -> None:
        if self._out is None:
            self._out = self.file.open("a", encoding="utf-8")
        self._out.write(json.dumps(record, separators=(",", ":")) + "\n")
        self._out.flush()
        if self.sync:
            os.fsync(self._out.fileno())

    def close(self) -> None:
        if self._out is not None:
            self._out.close()
            self._out = None
