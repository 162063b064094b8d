"""Micro and macro benchmarks of the differential layer.

Layer: bench — may import anything public from deltalog packages and peers.
Run: `python -m bench.bench_differential [--scale 1.0] [--updates 200]`.

- consolidate: `differential.batch.consolidate` on 10M updates (3 int64 data
  columns over small domains, one time coordinate, diffs) against bare numpy
  (`np.lexsort` + `np.add.reduceat`) on the same arrays in the same run; goal <= 2x.
- lookup: 1M keys looked up in a Spine of 10M entries; goal < 1 s.
- reachability: iterative reachability from one hub on a 1M-edge power-law graph,
  built directly on differential: the initial fixpoint, then single-edge
  insertions and deletions, each its own commit (p50/p99/max latency).

Figures are printed as markdown tables with the peak RSS; nothing is asserted.
"""

from __future__ import annotations

import argparse
import gc

import numpy as np

from bench.common import peak_rss_mb, percentiles, print_table, stopwatch
from bench.generators import power_law_graph
from differential.batch import Updates, consolidate
from differential.engine import Engine
from differential.inputs import Requests
from differential.operators.arrange import ArrangeOp
from differential.operators.enter import AsCollection, EnterArranged
from differential.operators.iterate import Subscope, Variable
from differential.operators.join import JoinOp
from differential.operators.linear import concat, enter, leave
from differential.operators.reduce import ReduceOp, distinct
from differential.time import Antichain
from differential.trace.spine import Spine

I64 = np.dtype(np.int64)


# -- (a) consolidation -------------------------------------------------------------


def random_updates(n: int, seed: int = 0) -> Updates:
    """`n` updates over small domains (many duplicates), epochs 0..3, diffs ±1."""
    rng = np.random.default_rng(seed)
    cols = tuple(rng.integers(0, hi, size=n, dtype=np.int64) for hi in (1_000, 100, 10))
    times = rng.integers(0, 4, size=(1, n), dtype=np.int64)
    diffs = rng.choice(np.array([-1, 1, 1], dtype=np.int64), size=n)
    return Updates(cols, times, diffs)


def bare_numpy(updates: Updates) -> int:
    """The floor: one lexsort, gathers, run starts, `add.reduceat`, drop zeros."""
    c0, c1, c2 = updates.columns
    t = updates.times[0]
    order = np.lexsort((t, c2, c1, c0))
    s0, s1, s2, st, sd = c0[order], c1[order], c2[order], t[order], updates.diffs[order]
    starts = np.empty(len(order), dtype=bool)
    starts[0] = True
    starts[1:] = (s0[1:] != s0[:-1]) | (s1[1:] != s1[:-1]) | (s2[1:] != s2[:-1])
    starts[1:] |= st[1:] != st[:-1]
    idx = np.flatnonzero(starts)
    sums = np.add.reduceat(sd, idx)
    keep = sums != 0
    out = (s0[idx][keep], s1[idx][keep], s2[idx][keep], st[idx][keep], sums[keep])
    return len(out[-1])


def bench_consolidate(n: int, repeats: int = 3) -> list[list[object]]:
    updates = random_updates(n)
    ours, floor = [], []
    for _ in range(repeats):
        with stopwatch() as sw:
            result = consolidate(updates)
        ours.append(sw.seconds)
        with stopwatch() as sw:
            count = bare_numpy(updates)
        floor.append(sw.seconds)
        assert len(result) == count, "the two consolidations disagree"
    best, base = min(ours), min(floor)
    return [
        [f"consolidate {n:,} updates", best, f"{len(result):,} out"],
        [f"bare numpy lexsort+reduceat {n:,}", base, ""],
        ["ratio consolidate / numpy (goal <= 2)", best / base, ""],
    ]


# -- (b) lookups in a spine ---------------------------------------------------------


def bench_lookup(entries: int, queries: int, batches: int = 10) -> list[list[object]]:
    rng = np.random.default_rng(1)
    key_space = entries // 4  # about four values per key
    spine = Spine(1, [I64, I64], 1)
    zero = Antichain([(0,)])
    with stopwatch() as build:
        per = entries // batches
        for epoch in range(batches):
            keys = rng.integers(0, key_space, size=per, dtype=np.int64)
            vals = rng.integers(0, 1_000_000, size=per, dtype=np.int64)
            spine.insert(Updates.at([keys, vals], (epoch,)), zero, zero)
    probe = rng.integers(0, key_space * 2, size=queries, dtype=np.int64)  # half miss
    times = []
    for _ in range(3):
        with stopwatch() as sw:
            owner, _ = spine.lookup([probe])
        times.append(sw.seconds)
    return [
        [f"build spine of {len(spine):,} entries ({spine.batch_count} batches)", build.seconds, ""],
        [f"lookup {queries:,} keys (goal < 1 s)", min(times), f"{len(owner):,} matches"],
    ]


# -- (c) iterative reachability -----------------------------------------------------


def reach_engine(src: np.ndarray, dst: np.ndarray, root: int) -> tuple[Engine, list[int]]:
    eng = Engine()
    eng.create_input("edge", [I64, I64])
    eng.create_input("root", [I64])
    eng.commit(
        {
            "edge": Requests((src, dst), np.ones(len(src), bool)),
            "root": Requests((np.array([root]),), np.ones(1, bool)),
        }
    )
    df = eng.dataflow("reach")
    edges = df.import_input("edge", [0, 1], 1)
    roots = AsCollection(df.import_input("root", [0], 1)).output
    inner = Subscope(df.root).inner
    e_in = EnterArranged(inner, edges)
    var = Variable(inner, [I64], "reach")
    step = JoinOp(ArrangeOp(var.output, 1), e_in, [1]).output
    dist = ReduceOp(ArrangeOp(concat([enter(roots, inner), step]), 1), distinct, [], "distinct")
    var.set(dist.output)
    out = df.capture(leave(dist.output), "reach")
    reached = [0]
    out.listeners.append(lambda u, _: reached.__setitem__(0, reached[0] + int(u.diffs.sum())))
    eng.start(df)
    return eng, reached


def bench_reach(n_edges: int, n_updates: int) -> list[list[object]]:
    src, dst = power_law_graph(n_edges, seed=0)
    root = int(np.argmax(np.bincount(src)))
    with stopwatch() as initial:
        eng, reached = reach_engine(src, dst, root)
    rows: list[list[object]] = [
        [f"reach initial fixpoint ({n_edges:,} edges)", initial.seconds, f"{reached[0]:,} nodes"]
    ]
    rng = np.random.default_rng(2)
    nodes = int(max(src.max(), dst.max())) + 1
    existing = set(zip(src[:1000].tolist(), dst[:1000].tolist(), strict=True))
    new_edges: list[tuple[int, int]] = []
    while len(new_edges) < n_updates:
        a, b = (int(x) for x in rng.integers(0, nodes, size=2))
        if a != b and (a, b) not in existing:
            new_edges.append((a, b))
            existing.add((a, b))
    pick = rng.choice(len(src), size=n_updates, replace=False)
    gone = [(int(src[i]), int(dst[i])) for i in pick]
    for label, edits, inserting in (("insert", new_edges, True), ("delete", gone, False)):
        latencies = []
        for a, b in edits:
            req = Requests((np.array([a]), np.array([b])), np.array([inserting]))
            with stopwatch() as sw:
                eng.commit({"edge": req})
            latencies.append(sw.seconds)
        p = percentiles(latencies)
        rows.append(
            [
                f"reach {n_updates} single-edge {label}s: p50 / p99 / max",
                p["p50"],
                f"{p['p99']:.4g} / {p['max']:.4g} s; {reached[0]:,} nodes",
            ]
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0, help="1.0: 10M updates, 1M edges")
    parser.add_argument("--updates", type=int, default=200, help="single-edge commits of each kind")
    args = parser.parse_args()
    scale = args.scale
    rows = bench_consolidate(max(1_000, round(10_000_000 * scale)))
    gc.collect()
    rows += bench_lookup(
        max(10_000, round(10_000_000 * scale)), max(1_000, round(1_000_000 * scale))
    )
    gc.collect()
    rows += bench_reach(max(1_000, round(1_000_000 * scale)), args.updates)
    rows.append(["peak RSS (MiB)", peak_rss_mb(), ""])
    print_table(rows, ["benchmark", "seconds", "notes"])


if __name__ == "__main__":
    main()
