"""What the model test measures from outside: `db.stats()` and the durable directory.

`stored` sums every update the engine holds (inputs' presence and arrangements,
each dataflow's and each view's arrangements); `log_bytes` is the size of the log
segments in a durable directory (a read must never append to them).
`eager_compaction` is the one hook below the public API besides the fault points:
it shrinks the spine's merge thresholds for a while (see `EAGER_SPINE`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from datalog import Database
from differential.tuning import TUNING, tuned


def stored(stats: dict[str, Any]) -> int:
    """Every update held in the engine's inputs, dataflows and views."""
    return sum(stored_parts(stats).values())


def stored_parts(stats: dict[str, Any]) -> Counter[str]:
    """The updates `stored` counts, by where they are held: the inputs, each view,
    and each dataflow (by name and rank among those of its name)."""
    parts: Counter[str] = Counter()
    for inp in stats["inputs"].values():
        parts["inputs"] += inp["updates"] + sum(a["tuples"] for a in inp["arrangements"].values())
    ranks: Counter[str] = Counter()
    for dataflow in stats["dataflows"]:
        ranks[dataflow["name"]] += 1
        key = f"dataflow {dataflow['name']} #{ranks[dataflow['name']]}"
        parts[key] += sum(arrangement[1] for arrangement in dataflow["arrangements"])
    for name, view in stats["views"].items():
        held = sum(arrangement[1] for arrangement in view["arrangements"])
        parts[f"view {name}"] += view["tuples"] + held
    return parts


def log_bytes(path: Path | None) -> int:
    if path is None:
        return 0
    return sum(p.stat().st_size for p in path.glob("log-*.bin"))


def snapshots(path: Path | None) -> frozenset[str]:
    if path is None:
        return frozenset()
    return frozenset(p.name for p in path.glob("snapshot-*") if not p.name.endswith(".tmp"))


def live_counts(db: Database) -> tuple[int, int, int, dict[str, int]]:
    """(dataflows, views, subscribers, subscribers per live query key)."""
    stats = db.stats()
    queries = {key: q["subscribers"] for key, q in stats["queries"].items()}
    return len(stats["dataflows"]), len(stats["views"]), sum(queries.values()), queries


# The traces' tuning thresholds, made tiny: a trace merges (and so compacts) after a
# few batches instead of a few hundred entries, and an arrangement nobody reads
# arranges its deferred updates after a few dozen rows instead of 4,096. Stored
# updates then reach their steady size within a few commits, so a test can tell
# bounded from growing state in tens of commits (with the defaults, a toggled fact
# grows the state for thousands of commits before it levels off).
EAGER = {"recent_rows": 8, "small_trace": 16, "tail": 4, "lazy_batches": 4}
EAGER |= {"deferred": 4, "deferred_rows": 16}


@contextmanager
def eager_compaction() -> Iterator[None]:
    with tuned(TUNING.but(**EAGER)):
        yield
