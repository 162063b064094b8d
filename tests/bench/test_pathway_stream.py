"""Pathway's live mode: after every single change and every batch, its answer (size and
row digest) equals Deltalog's, so its latencies are measured to the complete effect.

Layer: bench (tests). Skipped where Pathway is not installed.
"""

from __future__ import annotations

import pytest

from bench.datasets import build
from bench.ldbc import Relations
from bench.peers.deltalog_peer import DeltalogPeer
from bench.runner import update_groups
from bench.workloads import WORKLOADS, params

pytest.importorskip("pathway")


@pytest.mark.parametrize(
    ("name", "dataset", "batch"),
    [
        ("triangles", "powerlaw-u-2000", 1),
        ("tc", "dag-5000", 1),
        ("bi2", "ldbc-sf0.003", 1),
        ("bi11", "ldbc-sample", 200),
    ],
)
def test_every_change_matches_deltalog(name: str, dataset: str, batch: int) -> None:
    from bench.peers.pathway_peer import PathwayPeer

    workload = WORKLOADS[name]
    assert workload.stream is not None
    everything = build(dataset) if dataset != "ldbc-sample" else _sample()
    p = params(workload, everything)
    relations = workload.select(everything)
    live, reference = PathwayPeer(), DeltalogPeer()
    try:
        for peer in (live, reference):
            peer.load(relations)
        start = live.watch(workload, p)
        assert start == reference.watch(workload, p)
        groups = update_groups(relations[workload.stream], 8 * batch, batch)
        changed = False
        for insert in (False, True):
            for rows in groups:
                got = live.apply(workload.stream, rows, insert)
                assert got == reference.apply(workload.stream, rows, insert)
                changed = changed or got != start
        assert got == start and changed
    finally:
        live.close()


def _sample() -> Relations:
    from bench.datasets import LDBC_DIR

    if not LDBC_DIR.is_dir():
        pytest.skip("LDBC SNB sample not present")
    return build("ldbc-sample")
