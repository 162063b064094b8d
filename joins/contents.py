"""Every entry of an arrangement as a lookup sees it (for unary proposers).

Layer: joins. Imports `differential`.

`Arranged` offers lookups by key, counts and the delta at a time, but no scan
of all its entries; a unary binding that proposes (3DF's remedy for
categorical skew) needs exactly that: every value of its set, crossed with
each prefix. Until `differential` offers the scan, this module reads it from
the three kinds of arrangement it knows, with the same rules as their
`lookup` (the delta at `time` included only when asked, or when it is not the
delta at `time`). For any other kind it answers None and the unary binding
only validates.
"""

from __future__ import annotations

import numpy as np

from differential.batch import Updates, concat, consolidate
from differential.operators.arrange import Arranged, ArrangeOp, EnterArranged, ImportOp
from differential.time import Time


def scannable(arranged: Arranged) -> bool:
    """Whether `entries` can read `arranged`."""
    if isinstance(arranged, EnterArranged):
        return scannable(arranged.outer)
    return isinstance(arranged, ArrangeOp | ImportOp)


def entries(arranged: Arranged, time: Time, include_delta: bool) -> Updates | None:
    """The entries `lookup` would find under every key, consolidated; None if unknown."""
    found = _entries(arranged, time, include_delta)
    return None if found is None else consolidate(found)


def _entries(arranged: Arranged, time: Time, include_delta: bool) -> Updates | None:
    if isinstance(arranged, EnterArranged):
        outer = _entries(arranged.outer, time[:-1], include_delta or time[-1] != 0)
        if outer is None:
            return None
        zeros = np.zeros((1, len(outer)), dtype=np.int64)
        return outer.with_times(np.concatenate([outer.times, zeros]))
    if isinstance(arranged, ArrangeOp):
        parts = [arranged.spine.updates()]
        pending = arranged.pending_batch
        if pending is not None and (include_delta or arranged.pending_time != time):
            parts.append(pending.updates())
        return concat(parts)
    if isinstance(arranged, ImportOp):
        if arranged.snapshot is not None:
            return arranged.snapshot.updates() if include_delta else arranged.empty()
        shared = arranged.shared
        parts = [shared.spine.updates()]
        if shared.pending is not None and (include_delta or shared.pending_epoch != time[0]):
            parts.append(shared.pending.updates())
        return concat(parts)
    return None
