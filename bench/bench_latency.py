"""The fixed cost of small changes: iteration rounds and single-edge commits.

Layer: bench — may import anything public from deltalog packages and peers.
Run: `python -m bench.bench_latency [--quick] [--runs 3] [--write]
[--only wiki-vote|reach12|triangles|reach-10k] [--updates N]`.

Rows (the table of the issue on per-round cost; medians of `--runs` runs):
- counter: `c(x + 1) :- c(x), x < N.` from `c(0)`, one new fact per iteration;
- reach12: all-pairs `reach` subscribed on a 12-node random graph with 20 edges,
  one edge toggled per commit (p50 and p90 of the commit);
- reach: single-source `reach` subscribed on a 100k-edge power-law graph, single
  edges retracted then inserted back (p50, p99), Pathway in the same run when it
  is installed (the `bench` extra); `--only reach-10k` runs the same on
  `powerlaw-10000`, the graph of issue 25's p99 goal and of `bench_spikes`;
- triangles: a triangle-count subscription on a 10k-edge undirected power-law
  graph, likewise;
- wiki-Vote: `n(k) :- k = count : { tri(_, _, _) }.` once, next to DuckDB's
  `count(*)` (needs ../shared/data/snap/Wiki-Vote.txt or $DELTALOG_DATA).
`--write` replaces the section "Small changes" of docs/benchmarks.md with the table.
Times are reported, never asserted.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from bench.common import DATA_DIR, format_table
from bench.peers.base import peer_class
from bench.runner import execute
from datalog import Database

DOC = Path(__file__).resolve().parents[1] / "docs" / "benchmarks.md"
SECTION = "## Small changes (bench_latency)"
Row = list[object]


def counter(n: int) -> float:
    """Seconds to derive `c(0..n)` one fact per iteration."""
    db = Database()
    db.define(".decl c(x: number)\nc(0).")
    start = time.perf_counter()
    db.define(f"c(x + 1) :- c(x), x < {n}.")
    assert len(db.query_columns("c(x)")["x"]) == n + 1
    return time.perf_counter() - start


def reach12(commits: int, seed: int = 7) -> list[float]:
    """Per-commit seconds, toggling one edge of a 12-node graph under `reach(x, y)`."""
    rng = random.Random(seed)
    db = Database()
    db.define(
        ".decl edge(x: number, y: number)\n.decl reach(x: number, y: number)\n"
        "reach(x, y) :- edge(x, y).\nreach(x, z) :- reach(x, y), edge(y, z)."
    )
    edges: set[tuple[int, int]] = set()
    while len(edges) < 20:
        edges.add((rng.randrange(12), rng.randrange(12)))
    db.insert("edge", sorted(edges))
    db.subscribe("reach(x, y)", lambda change: None)
    costs = []
    for i in range(commits):
        if i % 2:
            edge = rng.choice(sorted(edges))
            edges.discard(edge)
            start = time.perf_counter()
            db.retract("edge", [edge])
        else:
            edge = (rng.randrange(12), rng.randrange(12))
            while edge in edges:
                edge = (rng.randrange(12), rng.randrange(12))
            edges.add(edge)
            start = time.perf_counter()
            db.insert("edge", [edge])
        costs.append(time.perf_counter() - start)
    return costs


def _median(runs: int, job: Callable[[], float]) -> float:
    return statistics.median(job() for _ in range(runs))


def _quantile(samples: Sequence[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def counter_rows(sizes: Sequence[int], runs: int) -> list[Row]:
    rows: list[Row] = []
    for n in sizes:
        took = _median(runs if n <= 10_000 else 1, lambda n=n: counter(n))  # type: ignore[misc]
        rows.append([f"counter N = {n:,}", f"{took:.2f} s", f"{took / n * 1e6:.0f} us/iteration"])
    return rows


def reach12_rows(commits: int, runs: int) -> list[Row]:
    samples = [reach12(commits, seed=7 + r) for r in range(runs)]
    p50 = statistics.median(_quantile(s, 0.5) for s in samples) * 1e3
    p90 = statistics.median(_quantile(s, 0.9) for s in samples) * 1e3
    return [["reach12, toggle one edge", f"p50 {p50:.2f} ms", f"p90 {p90:.2f} ms"]]


def stream_rows(workload: str, dataset: str, updates: int, runs: int) -> list[Row]:
    """Deltalog and (if installed) Pathway on one update stream of the shared runner."""
    rows: list[Row] = []
    for system in ("deltalog", "pathway"):
        if system == "pathway" and not _installed(system):
            rows.append([f"{workload} {dataset}, pathway", "not installed", "(bench extra)"])
            continue
        spec: dict[str, object] = {"system": system, "workload": workload, "dataset": dataset}
        spec |= {"mode": "single", "updates": updates, "batch": 1}
        results = [execute(spec) for _ in range(runs)]
        p50 = statistics.median(r["p50_ms"] for r in results)
        p99 = statistics.median(r["p99_ms"] for r in results)
        label = f"{workload} {dataset}, {system}"
        rows.append([label, f"p50 {p50:.2f} ms", f"p99 {p99:.2f} ms"])
    return rows


def _installed(system: str) -> bool:
    try:
        peer_class(system)().close()
    except Exception:  # an optional peer that cannot start is reported, not fatal
        return False
    return True


def wiki_vote_rows(runs: int) -> list[Row]:
    path = DATA_DIR / "snap" / "Wiki-Vote.txt"
    if not path.exists():
        return [["wiki-Vote triangle count", f"skipped: {path} absent", ""]]
    from bench.datasets import build

    edges = build("snap-u:Wiki-Vote")["e"]

    def ours() -> float:
        db = Database()
        db.define(
            ".decl e(a: number, b: number)\n.decl tri(a: number, b: number, c: number)\n"
            ".decl n(k: number)\ntri(a, b, c) :- e(a, b), e(b, c), e(a, c).\n"
            "n(k) :- k = count : { tri(_, _, _) }."
        )
        db.insert("e", edges)
        start = time.perf_counter()
        db.query("n(k)")
        return time.perf_counter() - start

    def duck() -> float:
        import duckdb

        con = duckdb.connect()
        con.register("e", edges)
        start = time.perf_counter()
        con.execute(
            "select count(*) from e ab join e bc on ab.c1 = bc.c0 "
            "join e ac on ac.c0 = ab.c0 and ac.c1 = bc.c1"
        ).fetchall()
        return time.perf_counter() - start

    a, b = _median(runs, ours), _median(runs, duck)
    return [["wiki-Vote triangle count", f"{a:.2f} s vs DuckDB {b:.2f} s", f"{a / b:.1f}x"]]


ONLY: dict[str, Callable[[bool, int, int], list[Row]]] = {
    "wiki-vote": lambda quick, runs, updates: wiki_vote_rows(runs),
    "reach12": lambda quick, runs, updates: reach12_rows(50 if quick else 200, runs),
    "triangles": lambda quick, runs, updates: stream_rows(
        "triangles", "powerlaw-u-10000", updates, runs
    ),
    "reach-10k": lambda quick, runs, updates: stream_rows("reach", "powerlaw-10000", updates, runs),
}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, one run")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--write", action="store_true", help="update docs/benchmarks.md")
    parser.add_argument("--only", choices=list(ONLY), help="run only this row")
    parser.add_argument("--updates", type=int, help="single-edge updates per stream (100)")
    args = parser.parse_args(argv)
    runs = 1 if args.quick else args.runs
    updates = args.updates or (20 if args.quick else 100)
    if args.only:
        rows = ONLY[args.only](args.quick, runs, updates)
        print(format_table(rows, ["case", "figure", "detail"]))
        return 0
    sizes = [1_000, 5_000] if args.quick else [1_000, 5_000, 100_000]
    rows = [
        *counter_rows(sizes, runs),
        *reach12_rows(50 if args.quick else 200, runs),
        *stream_rows("reach", "powerlaw-100000", updates, runs),
        *stream_rows("triangles", "powerlaw-u-10000", updates, runs),
        *wiki_vote_rows(runs),
    ]
    table = format_table(rows, ["case", "figure", "detail"])
    print(table)
    if args.write:
        _write(table, runs)
    return 0


def _write(table: str, runs: int) -> None:
    text = DOC.read_text(encoding="utf-8") if DOC.exists() else ""
    body = (
        f"{SECTION}\n\n`python -m bench.bench_latency --write` (medians of {runs} runs; "
        "the machine is shared, so compare rows of one run).\n\n" + table + "\n"
    )
    head, found, tail = text.partition(SECTION)
    rest = tail.split("\n## ", 1)
    after = "\n## " + rest[1] if found and len(rest) > 1 else ""
    DOC.write_text((head.rstrip() + "\n\n" if head.strip() else "") + body + after)


if __name__ == "__main__":
    raise SystemExit(main())
