"""DuckDB baselines on the standard generated workloads (and SNAP files if given).

Layer: bench — may import anything public from deltalog packages and peers.
Run: `python -m bench.bench_peers [--scale 0.1] [--snap PATH ...]`. Prints one
markdown table; times are reported, never asserted.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path

import numpy as np

from bench.common import peak_rss_mb, print_table, timed
from bench.generators import dag_for_closure, power_law_graph, read_snap
from bench.peers.duckdb_peer import EdgeDB

HEADERS = ["workload", "nodes", "edges", "answer", "gen/read s", "load s", "query s"]


Edges = tuple[np.ndarray, np.ndarray]
Query = Callable[[EdgeDB, np.ndarray], tuple[int, float]]


def _reach_from_hub(db: EdgeDB, src: np.ndarray) -> tuple[int, float]:
    """Reachability from the node with the most out-edges, a source that reaches far."""
    reached, seconds = db.reachability(int(np.argmax(np.bincount(src))))
    return int(reached.size), seconds


def _closure(db: EdgeDB, src: np.ndarray) -> tuple[int, float]:
    return db.transitive_closure()


def _triangles(db: EdgeDB, src: np.ndarray) -> tuple[int, float]:
    return db.triangles()


def _row(name: str, edges: Edges, made: float, query: Query) -> list[object]:
    src, dst = edges
    with EdgeDB(src, dst) as db:
        answer, seconds = query(db, src)
        nodes = int(np.union1d(src, dst).size)
        return [name, nodes, int(src.size), answer, made, db.load_seconds, seconds]


def run(scale: float, snaps: Sequence[Path]) -> list[list[object]]:
    """One row per workload; `scale=1.0` is 1M-edge graphs and a ~1M-pair closure."""
    edges = max(1_000, round(1_000_000 * scale))
    pairs = max(10_000, round(1_000_000 * scale))
    graph, made = timed(partial(power_law_graph, edges, seed=0))
    rows = [_row(f"reach power-law {edges:,}", graph, made, _reach_from_hub)]
    dag, made = timed(partial(dag_for_closure, pairs, seed=0))
    rows.append(_row(f"tc dag ~{pairs:,} pairs", dag, made, _closure))
    undirected, made = timed(partial(power_law_graph, edges, seed=0, directed=False))
    rows.append(_row(f"triangles power-law {edges:,}", undirected, made, _triangles))
    for path in snaps:
        snap, made = timed(partial(read_snap, path))
        rows.append(_row(f"reach {path.name}", snap, made, _reach_from_hub))
        rows.append(_row(f"triangles {path.name}", snap, made, _triangles))
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--scale", type=float, default=1.0, help="1.0 = 1M edges / 1M pairs")
    parser.add_argument("--snap", type=Path, action="append", default=[], help="SNAP edge list")
    args = parser.parse_args(argv)
    print_table(run(args.scale, args.snap), HEADERS)
    print(f"peak RSS: {peak_rss_mb():,.0f} MiB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
