"""Seeded, vectorized edge-list generators and a fast SNAP edge-list reader.

Layer: bench — may import anything public from deltalog packages and peers.
Every generator returns `(src, dst)` as two int64 numpy arrays of one length, is
deterministic for a given seed, and never loops in Python per edge: edges are drawn
in vectorized rounds, self loops dropped and duplicates removed by sorting a packed
`src * n + dst` key, until enough distinct edges exist.
"""

from __future__ import annotations

import gzip
import math
from collections.abc import Callable
from os import PathLike

import numpy as np

__all__ = ["dag_for_closure", "power_law_graph", "random_dag", "read_snap"]

Edges = tuple[np.ndarray, np.ndarray]

# soc-LiveJournal1 has 4.85M nodes and 69M edges: about 14 edges per node.
LIVEJOURNAL_EDGES_PER_NODE = 14
_MAX_ROUNDS = 64


def power_law_graph(
    n_edges: int,
    n_nodes: int | None = None,
    alpha: float = 2.3,
    seed: int = 0,
    directed: bool = True,
    max_degree: int | None = None,
) -> Edges:
    """A heavy-tailed graph in the Chung-Lu style, shaped like LiveJournal.

    Node `i` gets weight `(i + i0) ** (-1 / (alpha - 1))`, so degrees follow a power law
    with exponent about `alpha`; the offset `i0` is chosen so the biggest hub expects
    about `max_degree` edges at each end (default `1.5 * sqrt(2 * n_edges)`, the ratio
    of soc-LiveJournal1: max out-degree 20,293 for 69M edges). Both endpoints of an
    edge are drawn by weight, so in- and out-degree are correlated as in social
    graphs; node ids are then shuffled so that hubs are not the small ids.
    `n_nodes` defaults to `n_edges // 14`, LiveJournal's edges per node.

    The result has exactly `n_edges` distinct edges, no self loops, in random order.
    With `directed=False` each undirected edge appears once, as `(min, max)`, so
    `e(a,b), e(b,c), e(a,c)` counts each triangle exactly once.
    """
    if alpha <= 1.0:
        raise ValueError(f"alpha must exceed 1, got {alpha}")
    if n_nodes is None:
        n_nodes = max(2, n_edges // LIVEJOURNAL_EDGES_PER_NODE)
    _check_capacity(n_edges, n_nodes, directed)
    if max_degree is None:
        max_degree = max(1, round(1.5 * math.sqrt(2 * n_edges)))
    rng = np.random.default_rng(seed)
    # at most half the mass on the top node, or tiny graphs draw only self loops
    top_share = min(0.5, max_degree / max(1, n_edges))
    sample = _PowerLaw(n_nodes, 1.0 / (alpha - 1.0), top_share)
    relabel = rng.permutation(n_nodes).astype(np.int64)

    def draw(count: int) -> Edges:
        src = relabel[sample(rng, count)]
        dst = relabel[sample(rng, count)]
        return (src, dst) if directed else (np.minimum(src, dst), np.maximum(src, dst))

    return _distinct_edges(draw, n_edges, n_nodes, rng)


class _PowerLaw:
    """Draws node ids in [0, n) with density `(x + i0) ** -beta`, by inverting the CDF
    in closed form (no per-node table, no search). `i0` is set so node 0 gets about
    `top_share` of the mass, or as close as the tail allows."""

    def __init__(self, n: int, beta: float, top_share: float) -> None:
        self.n, self.beta = n, beta
        lo, hi = 1e-6, float(n)
        for _ in range(100):  # bisection on log(i0); the top share falls as i0 grows
            mid = math.sqrt(lo * hi)
            lo, hi = (mid, hi) if self._top_share(mid) > top_share else (lo, mid)
        self.i0 = hi

    def _g(self, x: np.ndarray | float, i0: float) -> np.ndarray | float:
        """An antiderivative of the density."""
        if abs(self.beta - 1.0) < 1e-9:
            return np.log(np.add(x, i0))
        return np.power(np.add(x, i0), 1.0 - self.beta) / (1.0 - self.beta)

    def _top_share(self, i0: float) -> float:
        g0, g1, gn = (float(self._g(x, i0)) for x in (0.0, 1.0, float(self.n)))
        return (g1 - g0) / (gn - g0)

    def __call__(self, rng: np.random.Generator, count: int) -> np.ndarray:
        g0, gn = float(self._g(0.0, self.i0)), float(self._g(float(self.n), self.i0))
        g = g0 + rng.random(count) * (gn - g0)
        if abs(self.beta - 1.0) < 1e-9:
            x = np.exp(g) - self.i0
        else:
            x = np.power(g * (1.0 - self.beta), 1.0 / (1.0 - self.beta)) - self.i0
        return np.clip(x.astype(np.int64), 0, self.n - 1)


def random_dag(n_nodes: int, n_edges: int, seed: int = 0) -> Edges:
    """A uniformly random DAG with `n_edges` distinct edges, all from lower to higher id.

    It is the random graph G(n, m) with every edge oriented from its smaller end to
    its larger one, edges in random order.
    """
    _check_capacity(n_edges, n_nodes, directed=False)
    rng = np.random.default_rng(seed)

    def draw(count: int) -> Edges:
        a = rng.integers(0, n_nodes, size=count, dtype=np.int64)
        b = rng.integers(0, n_nodes, size=count, dtype=np.int64)
        return np.minimum(a, b), np.maximum(a, b)

    return _distinct_edges(draw, n_edges, n_nodes, rng)


# The mean total degree of dag_for_closure's DAGs (3 out-edges per node on average)
# and the fit of their closure size, measured with DuckDB
# (bench.peers.duckdb_peer.transitive_closure) on random_dag(n, 3 * n), 3 seeds for
# each n in 2k..80k: pairs ~ 26.7 * n ** 1.083 (seed-to-seed spread under 5%).
# Below a mean degree of ~4 the closure is only a few times the edges; at 6 it is
# ~20 times, a deep recursion; above ~8 it grows much faster than n.
# Checked: targets 1e5, 1e6, 5e6 gave 0.90-0.96, 1.06-1.08, 0.93-0.95 of the target;
# 1e6 is 16,710 nodes and 50,130 edges.
DAG_DEGREE = 6.0
DAG_CLOSURE_COEFF = 26.7
DAG_CLOSURE_EXPONENT = 1.083


def dag_for_closure(target_pairs: int = 1_000_000, seed: int = 0) -> Edges:
    """A sparse random DAG whose transitive closure has roughly `target_pairs` pairs
    (within about 10% from 1e5 to 5e6; below that it falls short, 0.6 at 1e4).

    It is `random_dag(n, round(DAG_DEGREE * n / 2), seed)` with `n` chosen from the
    measured fit `pairs ~ DAG_CLOSURE_COEFF * n ** DAG_CLOSURE_EXPONENT`.
    """
    n_nodes = round((target_pairs / DAG_CLOSURE_COEFF) ** (1.0 / DAG_CLOSURE_EXPONENT))
    n_nodes = max(16, n_nodes)  # small enough graphs cannot hold 3 edges per node
    return random_dag(n_nodes, round(DAG_DEGREE * n_nodes / 2), seed)


def read_snap(path: str | PathLike[str]) -> Edges:
    """Read a SNAP edge list: leading `#` comment lines, then `src<TAB or SPACE>dst` rows.

    Parsing is pyarrow's multithreaded CSV reader; `.gz` files are decompressed on
    the fly. Line ends may be `\\n` or `\\r\\n`.
    """
    import pyarrow as pa
    from pyarrow import csv

    skip, delimiter = _snap_layout(path)
    try:
        table = csv.read_csv(
            path,
            read_options=csv.ReadOptions(skip_rows=skip, column_names=["src", "dst"]),
            parse_options=csv.ParseOptions(delimiter=delimiter, ignore_empty_lines=True),
            convert_options=csv.ConvertOptions(
                column_types={"src": "int64", "dst": "int64"}, strings_can_be_null=False
            ),
        )
    except pa.ArrowInvalid:  # tabs and spaces mixed (CA-GrQc has such a line)
        return _read_whitespace(path)
    src = table.column("src").to_numpy()
    dst = table.column("dst").to_numpy()
    return np.ascontiguousarray(src), np.ascontiguousarray(dst)


def _read_whitespace(path: str | PathLike[str]) -> Edges:
    """The slow path of `read_snap`: split on any whitespace, skip `#` lines."""
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt") as lines:
        text = "".join(line for line in lines if not line.startswith("#"))
    pairs = np.array(text.split(), dtype=np.int64).reshape(-1, 2)
    return np.ascontiguousarray(pairs[:, 0]), np.ascontiguousarray(pairs[:, 1])


def _snap_layout(path: str | PathLike[str]) -> tuple[int, str]:
    """The number of leading comment lines and the column delimiter of a SNAP file."""
    opener = gzip.open if str(path).endswith(".gz") else open
    skip = 0
    with opener(path, "rt", newline="") as lines:
        for line in lines:
            if not line.startswith("#"):
                return skip, "\t" if "\t" in line else " "
            skip += 1
    return skip, "\t"


def _check_capacity(n_edges: int, n_nodes: int, directed: bool) -> None:
    pairs = n_nodes * (n_nodes - 1) // (1 if directed else 2)
    if n_edges < 0 or n_nodes < 2:
        raise ValueError(f"need n_edges >= 0 and n_nodes >= 2, got {n_edges}, {n_nodes}")
    if n_edges > pairs // 2:
        raise ValueError(f"{n_edges} edges is too dense for {n_nodes} nodes (max {pairs // 2})")


def _distinct_edges(
    draw: Callable[[int], Edges], n_edges: int, n_nodes: int, rng: np.random.Generator
) -> Edges:
    """Draw edges in rounds until `n_edges` distinct non-loop ones exist; keep a random
    `n_edges` of them in random order."""
    keys = np.empty(0, dtype=np.int64)
    for _ in range(_MAX_ROUNDS):
        missing = n_edges - keys.size
        if missing <= 0:
            break
        src, dst = draw(missing + missing // 8 + 64)
        fresh = src[src != dst] * n_nodes + dst[src != dst]
        keys = _sorted_unique(np.concatenate([keys, fresh]))
    else:
        raise RuntimeError(f"could not draw {n_edges} distinct edges in {_MAX_ROUNDS} rounds")
    keys = rng.permutation(keys)[:n_edges]
    return keys // n_nodes, keys % n_nodes


def _sorted_unique(keys: np.ndarray) -> np.ndarray:
    """`np.unique` by sort and neighbour compare: much faster on large int64 arrays."""
    keys = np.sort(keys)
    if keys.size == 0:
        return keys
    keep = np.empty(keys.size, dtype=bool)
    keep[0] = True
    np.not_equal(keys[1:], keys[:-1], out=keep[1:])
    return keys[keep]
