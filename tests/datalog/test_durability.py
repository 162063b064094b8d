"""Database(path): every committed epoch survives a restart, nothing else does."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from datalog.cli.commands import main as cli
from datalog.db.database import Database
from datalog.lang.errors import DatalogError
from datalog.storage.frames import CorruptLogError, DatabaseLockedError, DurabilityError

PROGRAM = """
.decl edge(x: number, y: symbol)
.decl r(x: number, y: symbol)
r(x, y) :- edge(x, y).
edge(1, "a").
"""


def _fill(path: Path) -> tuple[int, list[tuple[object, ...]]]:
    db = Database(path)
    db.define(PROGRAM)
    with db.transaction() as tx:
        tx.insert("edge", [(2, "b"), (3, "c")])
    with db.transaction() as tx:
        tx.retract("edge", [(1, "a")])
    answer = sorted(db.query("r(x, y)"))
    db.close()
    return db.epoch, answer


def test_reopening_replays_definitions_and_transactions_to_the_same_epoch(
    tmp_path: Path,
) -> None:
    epoch, answer = _fill(tmp_path)
    again = Database(tmp_path)
    assert again.epoch == epoch
    assert sorted(again.query("r(x, y)")) == answer == [(2, "b"), (3, "c")]


def test_a_reopened_database_keeps_logging(tmp_path: Path) -> None:
    _fill(tmp_path)
    db = Database(tmp_path)
    db.insert("edge", [(4, "d")])
    db.close()
    assert (4, "d") in Database(tmp_path).query("r(x, y)")


def test_rejected_definitions_and_transactions_are_not_logged(tmp_path: Path) -> None:
    epoch, answer = _fill(tmp_path)
    db = Database(tmp_path)
    with pytest.raises(DatalogError):
        db.define("r(x) :- nowhere(x).")
    with pytest.raises(DatalogError), db.transaction() as tx:
        tx.insert("edge", [(5, "e")])
        tx.insert("edge", [("not a number", "f")])
    db.close()
    again = Database(tmp_path)
    assert again.epoch == epoch
    assert sorted(again.query("r(x, y)")) == answer


def _segment(path: Path) -> Path:
    (segment,) = sorted(path.glob("log-*.bin"))
    return segment


def test_a_torn_last_record_is_cut_off_and_the_log_stays_appendable(tmp_path: Path) -> None:
    epoch, answer = _fill(tmp_path)
    segment = _segment(tmp_path)
    whole = segment.stat().st_size
    db = Database(tmp_path)
    db.insert("edge", [(8, "h")])  # then lose the end of its record, as a crash would
    db.close()
    with segment.open("r+b") as log:
        log.truncate(segment.stat().st_size - 3)
    db = Database(tmp_path)
    assert db.epoch == epoch and segment.stat().st_size == whole  # truncated, not rewritten
    db.insert("edge", [(7, "g")])
    db.close()
    again = Database(tmp_path)
    assert sorted(again.query("r(x, y)")) == sorted([*answer, (7, "g")])


def test_a_record_that_lost_only_its_last_byte_does_not_swallow_the_next(tmp_path: Path) -> None:
    _fill(tmp_path)
    db = Database(tmp_path)
    db.insert("edge", [(8, "h")])
    db.close()
    segment = _segment(tmp_path)
    with segment.open("r+b") as log:
        log.truncate(segment.stat().st_size - 1)
    db = Database(tmp_path)
    db.insert("edge", [(9, "i")])  # acknowledged: must survive
    db.close()
    rows = Database(tmp_path).query("r(x, y)")
    assert (9, "i") in rows and (8, "h") not in rows


def test_a_corrupt_middle_record_is_a_clear_error_and_recover_keeps_what_precedes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _fill(tmp_path)
    segment = _segment(tmp_path)
    data = bytearray(segment.read_bytes())
    first_len = int.from_bytes(data[4:8], "little")
    second = 12 + first_len  # the first commit's record follows the definition's
    data[second + 20] ^= 0xFF
    segment.write_bytes(bytes(data))
    with pytest.raises(CorruptLogError) as caught:
        Database(tmp_path)
    assert str(segment) in str(caught.value) and f"offset {second}" in str(caught.value)
    assert cli(["recover", str(tmp_path)]) == 0
    assert "kept the 1 record before it" in capsys.readouterr().out
    db = Database(tmp_path)
    assert db.query("r(x, y)") == [(1, "a")]  # the definition and its fact, nothing after


def test_a_second_writer_is_refused_in_this_process_and_in_another(tmp_path: Path) -> None:
    db = Database(tmp_path)
    with pytest.raises(DatabaseLockedError, match="already open"):
        Database(tmp_path)
    code = f"from datalog import Database\nDatabase({str(tmp_path)!r})"
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert other.returncode != 0 and "already open" in other.stderr
    db.close()
    Database(tmp_path).close()


_SECOND_WRITER = """
import sys
from datalog import Database
try:
    db = Database(sys.argv[1])
except Exception as error:
    print(type(error).__name__, error)
    sys.exit(3)
db.insert("edge", [(50, "second")])  # a second writer would replay, then write here
"""


def test_deleting_the_lock_file_lets_no_second_writer_in(tmp_path: Path) -> None:
    """The lock was only an flock on LOCK: once it was deleted, a second Database(path)
    took a new LOCK, opened, and its writes cut the first writer's records off."""
    _fill(tmp_path)
    db = Database(tmp_path)
    db.insert("edge", [(4, "d")])
    (tmp_path / "LOCK").unlink()
    with pytest.raises(DatabaseLockedError, match="already open") as caught:
        Database(tmp_path)
    assert isinstance(caught.value, DurabilityError) and isinstance(caught.value, DatalogError)
    done = subprocess.run(
        [sys.executable, "-c", _SECOND_WRITER, str(tmp_path)], capture_output=True, text=True
    )
    assert done.returncode == 3 and "DatabaseLockedError" in done.stdout, done.stdout + done.stderr
    db.insert("edge", [(5, "e")])
    expected = sorted(db.query("r(x, y)"))
    db.close()
    with Database(tmp_path) as again:
        assert sorted(again.query("r(x, y)")) == expected
        assert (4, "d") in expected and (5, "e") in expected


def test_every_value_comes_back_exactly(tmp_path: Path) -> None:
    program = """
        .decl v(n: number, u: unsigned, f: float, s: symbol)
        .decl m(x: number) multiset
        .decl flag()
    """
    rows = [
        (-(2**63), 2**64 - 2, float("-inf"), "a\0"),
        (2**63 - 1, 0, -0.0, "\0"),
        (0, 2**63, float("inf"), "é\u2028 \t"),
        (5, 1, 1.5e-308, ""),
    ]
    with Database(tmp_path) as db:
        db.define(program)
        db.insert("v", rows)
        db.insert("m", [(1,), (1,), (2,)])
        db.insert("flag", [()])
        before = db.query_columns("v(n, u, f, s)")
    for checkpointed in (False, True):
        with Database(tmp_path) as db:
            after = db.query_columns("v(n, u, f, s)")
            order_b, order_a = np.argsort(before["n"]), np.argsort(after["n"])
            for name in "nus":
                assert before[name][order_b].tolist() == after[name][order_a].tolist()
            assert np.array_equal(
                before["f"][order_b].view(np.int64), after["f"][order_a].view(np.int64)
            )
            assert db.query("m(x)") == [(1,), (2,)]
            db.retract("m", [(1,)])
            assert db.query("m(x)") == [(1,), (2,)]  # one of two copies of 1 is left
            db.insert("m", [(1,)])
            assert db.query("flag()") == [()]
            if not checkpointed:
                db.checkpoint()
    assert after["f"][order_a][0] == float("-inf")


def _entries(path: Path) -> list[str]:
    """The store's entries, as `log<seq>` and `snapshot<seq>`."""
    found = (re.fullmatch(r"(log|snapshot)-(\d+)(\.bin)?", p.name) for p in path.iterdir())
    return sorted(f"{m[1]}{int(m[2])}" for m in found if m)


def test_a_checkpoint_keeps_the_previous_snapshot_and_the_log_after_it(tmp_path: Path) -> None:
    """Two snapshots and the log since the older stay (ADR 0035): one damaged
    snapshot loses nothing. The empty database is the snapshot before the first."""
    epoch, answer = _fill(tmp_path)
    with Database(tmp_path) as db:
        db.checkpoint()
        assert _entries(tmp_path) == ["log0", "snapshot1"]
        db.insert("edge", [(4, "d")])
        assert _entries(tmp_path) == ["log0", "log1", "snapshot1"]
    with Database(tmp_path) as again:
        assert again.epoch == epoch + 1
        assert sorted(again.query("r(x, y)")) == sorted([*answer, (4, "d")])
        again.checkpoint()
        assert _entries(tmp_path) == ["log1", "snapshot1", "snapshot2"]
        again.insert("edge", [(5, "e")])
        again.checkpoint()
        assert _entries(tmp_path) == ["log2", "snapshot2", "snapshot3"]
        assert again.store is not None and again.store.segment.name == "log-000000000003.bin"
    with Database(tmp_path) as last:
        assert sorted(last.query("r(x, y)")) == sorted([*answer, (4, "d"), (5, "e")])


def test_checkpoints_happen_on_their_own_and_keep_the_log_short(tmp_path: Path) -> None:
    with Database(tmp_path, checkpoint_every=10) as db:
        db.define(".decl e(x: number)")
        for i in range(35):
            db.insert("e", [(i,)])
        snapshots = sorted(tmp_path.glob("snapshot-*"))
        assert len(snapshots) == 2  # the newest and the one before it
        older = snapshots[0].name.replace("snapshot", "log") + ".bin"
        assert sorted(p.name for p in tmp_path.glob("log-*"))[0] == older
        assert db.store is not None and db.store.records < 10
    with Database(tmp_path) as db:
        assert sorted(db.query("e(x)")) == [(i,) for i in range(35)]


_FULL_DISK = """
import resource, sys
from datalog import Database
from datalog.storage.frames import DurabilityError
db = Database(sys.argv[1])
db.define(".decl e(x: number, y: symbol)")
db.insert("e", [(1, "small")])
size = sum(p.stat().st_size for p in db.store.dir.glob("log-*.bin"))
resource.setrlimit(resource.RLIMIT_FSIZE, (size + 3000, resource.RLIM_INFINITY))
try:
    db.insert("e", [(i, "x" * 50) for i in range(2, 200)])
except DurabilityError as error:
    print("refused", db.epoch, sorted(db.query("e(x, _)")) == [(1,)], flush=True)
db.insert("e", [(3, "fits")])
print("acknowledged", db.epoch, flush=True)
"""


def test_a_failed_log_write_changes_nothing_and_the_next_commit_proceeds(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _FULL_DISK, str(tmp_path)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    refused, acknowledged = done.stdout.splitlines()
    assert refused == "refused 2 True"
    assert acknowledged == "acknowledged 3"
    with Database(tmp_path) as db:
        assert db.epoch == 3 and sorted(db.query("e(x, _)")) == [(1,), (3,)]


def _writer(path: Path, acks: int, seed: int) -> None:
    """A child process: open (recovering), then commit forever, acknowledging each
    transaction `i` (rows `(i, 0..i % 7)`) on the pipe once `commit` has returned."""
    rng = np.random.default_rng(seed)
    db = Database(path, checkpoint_every=int(rng.integers(2, 9)))
    if "t" not in db.checked.schema.relations:
        db.define(".decl t(i: number, j: number)")
    done = db.query("t(i, _)")
    i = max((row[0] for row in done), default=-1) + 1
    while True:
        db.insert("t", [(i, j) for j in range(1 + i % 7)])
        os.write(acks, f"{i}\n".encode())
        i += 1


def _acknowledged(reader: int) -> list[int]:
    data = b""
    while chunk := os.read(reader, 65536):
        data += chunk
    return [int(line) for line in data.decode().split()]


@pytest.mark.slow
def test_sigkill_at_random_moments_never_loses_an_acknowledged_commit(tmp_path: Path) -> None:
    """50 writers killed at random moments (opening and recovering, committing,
    checkpointing): after each, every acknowledged transaction is there, whole,
    nothing seen before is lost, and nothing else is there but possibly the one
    in flight."""
    rng = np.random.default_rng(20261123)
    acknowledged, seen = -1, 0
    for trial in range(50):
        reader, writer = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child never returns into pytest
            os.close(reader)
            try:
                _writer(tmp_path, writer, trial)
            finally:
                os._exit(0)
        os.close(writer)
        time.sleep(float(rng.uniform(0.0, 0.5)))
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        acks = _acknowledged(reader)
        acknowledged = max([acknowledged, *acks])
        os.close(reader)
        with Database(tmp_path) as db:
            rows = db.query("t(i, j)") if "t" in db.checked.schema.relations else []
        present = sorted({i for i, _ in rows})
        assert present == list(range(len(present))), f"trial {trial}: a gap"
        # every acknowledged transaction, and all that an earlier open saw, is there;
        # beyond them at most the one in flight when the writer died
        floor = max(acknowledged + 1, seen)
        assert floor <= len(present) <= floor + 1, f"trial {trial}: {acks}"
        seen = len(present)
        assert sorted(rows) == [(i, j) for i in present for j in range(1 + i % 7)]
    assert acknowledged > 50  # the writers got far enough to checkpoint many times


def _legacy(path: Path) -> None:
    """A directory as the JSON-lines log of the first durability work left it."""
    path.mkdir(exist_ok=True)
    lines = [
        {"define": ".decl m(x: number, s: symbol) multiset\n.decl flag()"},
        {"changes": [{"relation": "m", "insert": True, "columns": [[1, 1, 2], ["a", "a", "b"]]}]},
        {"changes": [{"relation": "flag", "insert": True, "columns": [[]]}]},
        {"changes": [{"relation": "m", "insert": False, "columns": [[2], ["b"]]}]},
    ]
    text = "\n".join(json.dumps(line) for line in lines) + '\n{"changes": [{"rel'  # torn
    (path / "log.jsonl").write_text(text)


def test_a_legacy_log_is_migrated_once_even_if_a_crash_came_before_its_rename(
    tmp_path: Path,
) -> None:
    """A crash between the migration's checkpoint and its rename left log.jsonl next to
    the snapshot of its contents: reopening replayed it on top again (counts doubled)."""
    _legacy(tmp_path)
    with Database(tmp_path) as db:
        epoch = db.epoch
        assert sorted(db.query("m(x, s)")) == [(1, "a")] and db.query("flag()") == [()]
    assert not (tmp_path / "log.jsonl").exists()
    (tmp_path / "log.jsonl.migrated").rename(tmp_path / "log.jsonl")  # the rename lost
    with Database(tmp_path) as db:
        assert db.epoch == epoch and db.query("flag()") == [()]
        db.retract("m", [(1, "a")])  # one of the two copies
        assert db.query("m(x, s)") == [(1, "a")]
        db.retract("m", [(1, "a")])
        assert db.query("m(x, s)") == []
    assert (tmp_path / "log.jsonl.migrated").exists()


def test_a_database_dropped_without_close_releases_its_directory_at_once(
    tmp_path: Path,
) -> None:
    """No reference cycle keeps a dropped `Database` (and its lock) alive until the
    cycle collector happens to run: the next `Database(path)` opens at once."""
    import gc
    import weakref

    gc.disable()
    try:
        db = Database(tmp_path)
        db.define(".decl e(x: number)\n.decl r(x: number)\nr(x) :- e(x).")
        db.insert("e", [(1,)])
        db.subscribe("r(x)", lambda change: None).close()
        db.query("r(x)")
        dropped = weakref.ref(db)
        del db
        assert dropped() is None
        again = Database(tmp_path)
        assert again.query("r(x)") == [(1,)]
        again.close()
    finally:
        gc.enable()
