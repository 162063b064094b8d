"""The benchmark data generators, the SNAP reader and the DuckDB peer, at small sizes."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from bench.generators import dag_for_closure, power_law_graph, random_dag, read_snap

Edges = tuple[np.ndarray, np.ndarray]


def _assert_simple(edges: Edges, n_edges: int) -> None:
    src, dst = edges
    assert src.dtype == dst.dtype == np.int64
    assert src.shape == dst.shape == (n_edges,)
    assert not np.any(src == dst), "self loop"
    pairs = np.stack([src, dst], axis=1)
    assert len(np.unique(pairs, axis=0)) == n_edges, "duplicate edge"


def _same(a: Edges, b: Edges) -> bool:
    return bool(np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1]))


@given(
    n_edges=st.integers(0, 3_000),
    seed=st.integers(0, 2**32 - 1),
    alpha=st.floats(1.5, 3.5),
    directed=st.booleans(),
)
def test_power_law_graph_is_simple_and_in_range(
    n_edges: int, seed: int, alpha: float, directed: bool
) -> None:
    edges = power_law_graph(n_edges, n_nodes=200, alpha=alpha, seed=seed, directed=directed)
    _assert_simple(edges, n_edges)
    src, dst = edges
    assert src.size == 0 or (src.min() >= 0 and dst.max() < 200)
    if not directed:
        assert np.all(src < dst), "undirected edges come as (min, max)"


def test_power_law_graph_is_deterministic_per_seed() -> None:
    assert _same(power_law_graph(5_000, seed=7), power_law_graph(5_000, seed=7))
    assert not _same(power_law_graph(5_000, seed=7), power_law_graph(5_000, seed=8))


def test_power_law_graph_has_a_heavy_tail() -> None:
    src, _ = power_law_graph(50_000, seed=0)
    out_degree = np.bincount(src)
    mean = out_degree[out_degree > 0].mean()
    assert out_degree.max() > 10 * mean
    assert np.median(out_degree) < mean, "most nodes are below the mean, as in a power law"


def test_power_law_graph_rejects_impossible_density() -> None:
    with pytest.raises(ValueError, match="too dense"):
        power_law_graph(100, n_nodes=10)


@given(n_nodes=st.integers(20, 300), seed=st.integers(0, 2**32 - 1), data=st.data())
def test_random_dag_edges_go_from_lower_to_higher_ids(
    n_nodes: int, seed: int, data: st.DataObject
) -> None:
    n_edges = data.draw(st.integers(0, n_nodes * (n_nodes - 1) // 4))
    edges = random_dag(n_nodes, n_edges, seed)
    _assert_simple(edges, n_edges)
    src, dst = edges
    assert np.all(src < dst), "an edge against the id order could close a cycle"
    assert src.size == 0 or (src.min() >= 0 and dst.max() < n_nodes)


def test_random_dag_is_deterministic_per_seed() -> None:
    assert _same(random_dag(1_000, 3_000, 1), random_dag(1_000, 3_000, 1))
    assert not _same(random_dag(1_000, 3_000, 1), random_dag(1_000, 3_000, 2))


def test_dag_for_closure_is_near_its_target() -> None:
    peer = pytest.importorskip("bench.peers.duckdb_peer")
    pytest.importorskip("duckdb")
    src, dst = dag_for_closure(100_000, seed=0)
    assert np.all(src < dst)
    pairs, _ = peer.transitive_closure(src, dst)
    assert 70_000 < pairs < 140_000


# --- read_snap -----------------------------------------------------------------------


def test_read_snap_reads_tab_separated_crlf_with_comments(tmp_path: Path) -> None:
    path = tmp_path / "g.txt"
    path.write_bytes(b"# Directed graph\r\n# FromNodeId\tToNodeId\r\n0\t1\r\n1\t2\r\n7\t0")
    src, dst = read_snap(path)
    assert src.tolist() == [0, 1, 7] and dst.tolist() == [1, 2, 0]
    assert src.dtype == np.int64


def test_read_snap_reads_space_separated_without_comments(tmp_path: Path) -> None:
    path = tmp_path / "g.txt"
    path.write_text("3 4\n4 5\n10000000000 3\n")
    src, dst = read_snap(path)
    assert src.tolist() == [3, 4, 10_000_000_000] and dst.tolist() == [4, 5, 3]


def test_read_snap_reads_gzip(tmp_path: Path) -> None:
    path = tmp_path / "g.txt.gz"
    with gzip.open(path, "wt") as out:
        out.write("#c\n1\t2\n2\t3\n")
    src, dst = read_snap(path)
    assert src.tolist() == [1, 2] and dst.tolist() == [2, 3]


def test_read_snap_round_trips_a_generated_graph(tmp_path: Path) -> None:
    src, dst = power_law_graph(2_000, seed=3)
    path = tmp_path / "g.txt"
    np.savetxt(path, np.stack([src, dst], axis=1), fmt="%d", delimiter="\t", header="x")
    got = read_snap(path)
    assert _same(got, (src, dst))


# --- the DuckDB peer, against answers worked out by hand ------------------------------

# 0 -> 1 -> 2 -> 0 is a cycle, 2 -> 3 -> 4 a tail, 5 -> 6 apart; (0, 1) is repeated.
SRC = np.array([0, 1, 2, 2, 3, 5, 0])
DST = np.array([1, 2, 0, 3, 4, 6, 1])


def test_duckdb_reachability_includes_the_source_and_ends_on_cycles() -> None:
    peer = pytest.importorskip("bench.peers.duckdb_peer")
    pytest.importorskip("duckdb")
    reached, seconds = peer.reachability(SRC, DST, 1)
    assert reached.tolist() == [0, 1, 2, 3, 4]
    assert seconds >= 0.0
    assert peer.reachability(SRC, DST, 4)[0].tolist() == [4]
    assert peer.reachability(SRC, DST, 99)[0].tolist() == [99]


def test_duckdb_transitive_closure_counts_distinct_pairs() -> None:
    peer = pytest.importorskip("bench.peers.duckdb_peer")
    pytest.importorskip("duckdb")
    # Each cycle node reaches 0..4 (5 pairs each), 3 reaches 4, 5 reaches 6.
    assert peer.transitive_closure(SRC, DST)[0] == 3 * 5 + 1 + 1


def test_duckdb_triangles_count_the_directed_pattern() -> None:
    peer = pytest.importorskip("bench.peers.duckdb_peer")
    pytest.importorskip("duckdb")
    # a->b, b->c, a->c: (0,1,2) and (0,2,3) match; the cycle 4->5->6->4 does not.
    src = np.array([0, 1, 0, 2, 0, 4, 5, 6, 0])
    dst = np.array([1, 2, 2, 3, 3, 5, 6, 4, 1])
    assert peer.triangles(src, dst)[0] == 2


def test_duckdb_edge_db_times_load_and_queries_apart() -> None:
    peer = pytest.importorskip("bench.peers.duckdb_peer")
    pytest.importorskip("duckdb")
    with peer.EdgeDB(SRC, DST, threads=1) as db:
        assert db.load_seconds >= 0.0
        assert db.transitive_closure()[0] == 17
        assert db.reachability(5)[0].tolist() == [5, 6]


def test_duckdb_peer_rejects_mismatched_columns() -> None:
    peer = pytest.importorskip("bench.peers.duckdb_peer")
    pytest.importorskip("duckdb")
    with pytest.raises(ValueError, match="one length"):
        peer.EdgeDB(np.array([1, 2]), np.array([1]))
