"""How the engine's large, short-lived columns get their memory.

Layer: differential. Reaches numpy's allocator settings only.

numpy asks the kernel to back every array of 4 MiB or more with transparent
huge pages (`madvise(MADV_HUGEPAGE)`). Where the kernel's defrag policy for
such regions is `madvise` (the Linux default), the first touch of that memory
when no huge page is free stalls in synchronous compaction (numpy issue
#31590). The engine allocates and frees columns of millions of rows at every
step, so it would pay that stall again and again: the transitive closure of a
1M-pair DAG took 1.3 s with the advice and 0.7 s without on our machines (see
ADR 0010). An engine therefore turns the advice off, unless the user chose a
setting with numpy's own `NUMPY_MADVISE_HUGEPAGE` environment variable.
"""

from __future__ import annotations

import importlib
import os


def hugepage_advice() -> bool | None:
    """Whether numpy advises huge pages for large arrays (None: cannot tell)."""
    getter = getattr(_multiarray(), "_get_madvise_hugepage", None)
    return None if getter is None else bool(getter())


def use_small_pages() -> None:
    """Stop numpy's huge-page advice, unless `NUMPY_MADVISE_HUGEPAGE` decides it."""
    if "NUMPY_MADVISE_HUGEPAGE" in os.environ:
        return
    setter = getattr(_multiarray(), "_set_madvise_hugepage", None)
    if setter is not None:
        setter(False)


def set_hugepage_advice(enabled: bool) -> None:
    """Set numpy's huge-page advice (tests; users may prefer the environment variable)."""
    setter = getattr(_multiarray(), "_set_madvise_hugepage", None)
    if setter is not None:
        setter(enabled)


def _multiarray() -> object:
    return importlib.import_module("numpy._core.multiarray")
