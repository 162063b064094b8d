"""How the engine's large, short-lived columns get their memory, and give it back.

Layer: differential. Reaches numpy's allocator settings and, through ctypes,
the C library's allocator (glibc only).

numpy asks the kernel to back every array of 4 MiB or more with transparent
huge pages (`madvise(MADV_HUGEPAGE)`). Where the kernel's defrag policy for
such regions is `madvise` (the Linux default), the first touch of that memory
when no huge page is free stalls in synchronous compaction (numpy issue
#31590). The engine allocates and frees columns of millions of rows at every
step, so it would pay that stall again and again: the transitive closure of a
1M-pair DAG took 1.3 s with the advice and 0.7 s without on our machines (see
ADR 0010). An engine therefore turns the advice off, unless the user chose a
setting with numpy's own `NUMPY_MADVISE_HUGEPAGE` environment variable.

After a failed big computation (a budget spent half-way through a huge product),
glibc's malloc keeps the heap pages it freed: the process's RSS stays at its peak.
`give_back` hands them to the kernel (`malloc_trim(0)`) when malloc holds much free
memory (`mallinfo2`); elsewhere (musl, macOS, Windows) it does nothing.
"""

from __future__ import annotations

import ctypes
import functools
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


class _MallInfo2(ctypes.Structure):
    """glibc's `struct mallinfo2` (2.33 and later): every field a size_t."""

    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks",
            "uordblks", "fordblks", "keepcost",
        )
    ]  # fmt: skip


# Free heap memory below which trimming is not worth its cost (it walks the heap):
# a failed small request must not pay for it.
GIVE_BACK_FROM = 64 << 20


def give_back(at_least: int = GIVE_BACK_FROM) -> bool:
    """Return the heap memory malloc holds free to the kernel, when it holds at least
    `at_least` bytes (0: always try); True if it was trimmed. A no-op without glibc."""
    libc = _glibc()
    if libc is None:
        return False
    if at_least > 0 and hasattr(libc, "mallinfo2") and _free_bytes(libc) < at_least:
        return False
    return bool(libc.malloc_trim(0))


def held_free() -> int | None:
    """Bytes malloc holds free in its heap (None: not glibc 2.33+)."""
    libc = _glibc()
    return None if libc is None or not hasattr(libc, "mallinfo2") else _free_bytes(libc)


def _free_bytes(libc: ctypes.CDLL) -> int:
    return int(libc.mallinfo2().fordblks)


@functools.cache
def _glibc() -> ctypes.CDLL | None:
    """The C library, if it is glibc (it has `malloc_trim`), typed for our calls."""
    try:
        libc = ctypes.CDLL(None)
    except OSError:  # Windows: no default library to load
        return None
    if not hasattr(libc, "malloc_trim"):
        return None
    libc.malloc_trim.argtypes = [ctypes.c_size_t]
    libc.malloc_trim.restype = ctypes.c_int
    if hasattr(libc, "mallinfo2"):
        libc.mallinfo2.argtypes = []
        libc.mallinfo2.restype = _MallInfo2
    return libc
