"""Datasets of the benchmark suite, built from their names so a subprocess can rebuild them.

Layer: bench — may import anything public from deltalog packages and peers.
Names:
- `powerlaw-N`: a LiveJournal-shaped directed power-law graph of N edges (relation `e`);
- `powerlaw-u-N`: the same, undirected, each edge once as (min, max);
- `dag-P`: a sparse random DAG whose transitive closure has about P pairs;
- `snap:NAME` / `snap-u:NAME`: a SNAP edge list from `SNAP_DIR` (directed, or oriented
  (min, max) without loops);
- `ldbc-sfX`: a generated LDBC SNB-shaped network at scale factor X;
- `ldbc-sample`: the LDBC SNB Interactive CSV sample in `LDBC_DIR`.
Generated data is seeded (seed 0), so every process builds the same relations.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa

from bench import ldbc, ldbc_gen
from bench.common import DATA_DIR
from bench.generators import dag_for_closure, power_law_graph, read_snap

__all__ = ["LDBC_DIR", "SNAP_DIR", "available", "build", "scaled", "size"]

SNAP_DIR = DATA_DIR / "snap"
LDBC_DIR = DATA_DIR / "ldbc-snb" / "vanilla"


def _graph(src: np.ndarray, dst: np.ndarray) -> ldbc.Relations:
    return {"e": pa.table({"c0": src.astype(np.int64), "c1": dst.astype(np.int64)})}


def _oriented(src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each undirected edge once, as (min, max); self loops and duplicates dropped."""
    lo, hi = np.minimum(src, dst), np.maximum(src, dst)
    keys = np.unique(np.stack([lo[lo != hi], hi[lo != hi]], axis=1), axis=0)
    return keys[:, 0], keys[:, 1]


def build(name: str) -> ldbc.Relations:
    """The relations of dataset `name` (see the module docstring)."""
    kind, _, arg = name.partition(":")
    if kind in ("snap", "snap-u"):
        src, dst = _read_edges(SNAP_DIR / f"{arg}.txt")
        return _graph(*(_oriented(src, dst) if kind == "snap-u" else _dedup(src, dst)))
    if name.startswith("powerlaw-u-"):
        return _graph(*power_law_graph(int(name.rsplit("-", 1)[1]), seed=0, directed=False))
    if name.startswith("powerlaw-"):
        return _graph(*power_law_graph(int(name.rsplit("-", 1)[1]), seed=0))
    if name.startswith("dag-"):
        return _graph(*dag_for_closure(int(name.rsplit("-", 1)[1]), seed=0))
    if name.startswith("ldbc-sf"):
        return ldbc.to_relations(ldbc_gen.generate(float(name[len("ldbc-sf") :]), seed=0))
    if name == "ldbc-sample":
        return ldbc.load(LDBC_DIR)
    raise ValueError(f"unknown dataset {name!r}")


def _read_edges(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """`read_snap`, or, for files that mix tabs and spaces (CA-GrQc has a line with a
    space), a slower whitespace split."""
    try:
        return read_snap(path)
    except pa.ArrowInvalid:
        lines = path.read_text(encoding="ascii").splitlines()
        pairs = [ln.split()[:2] for ln in lines if ln.strip() and not ln.startswith("#")]
        both = np.array(pairs, dtype=np.int64)
        return both[:, 0].copy(), both[:, 1].copy()


def _dedup(src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    keys = np.unique(np.stack([src, dst], axis=1), axis=0)
    return keys[:, 0], keys[:, 1]


def available(name: str) -> str | None:
    """None if dataset `name` can be built here, else why not."""
    kind, _, arg = name.partition(":")
    if kind in ("snap", "snap-u") and not (SNAP_DIR / f"{arg}.txt").exists():
        return f"{SNAP_DIR / arg}.txt not present"
    if name == "ldbc-sample" and not LDBC_DIR.is_dir():
        return f"{LDBC_DIR} not present"
    return None


def size(relations: ldbc.Relations) -> int:
    """The total number of rows (facts) in `relations`."""
    return sum(table.num_rows for table in relations.values())


def scaled(name: str, factor: float) -> str:
    """The generated dataset `name` with its size multiplied by `factor` (edges, closure
    pairs or scale factor), or "" for a fixed dataset (SNAP files, the LDBC sample)."""
    if name.startswith("ldbc-sf"):
        return f"ldbc-sf{float(name[len('ldbc-sf') :]) * factor:g}"
    for prefix in ("powerlaw-u-", "powerlaw-", "dag-"):
        if name.startswith(prefix):
            return f"{prefix}{round(int(name[len(prefix) :]) * factor)}"
    return ""
