"""Workers: heavy requests computed in a forked child process, killed at their budget.

Layer: server — the standard library only; it knows nothing of the protocol.

A request that runs past its slice on the engine thread (docs/adr/0038) is computed
again in a child forked from the engine thread: the child sees a consistent
copy-on-write snapshot of the whole process as it was at the fork (the engine thread
owns the database, so nothing is half-changed), computes, writes its answer to a
pipe and exits. The parent never waits for it on the engine thread: the event loop
reads the pipe, kills the child with SIGKILL at its deadline, and reaps it. Whatever
the child does (a recursion that never ends, a regular expression that backtracks
for hours, a cross product that fills memory) ends with it, and the memory it
touched goes back to the operating system when it dies.

Fork with threads: the child is a copy of the forking thread alone. It must not use
what another thread may have held at the fork (the event loop, sockets, logging):
it only computes with the database, writes to its pipe with `os.write` and leaves
with `os._exit`. It first closes its copies of every socket (so a connection the
server closes is closed at once, not when the child dies), restores the default
SIGINT and SIGTERM actions, and sets an alarm that ends it even if the server
itself is gone. Where `fork` is unavailable (Windows), or unsafe with the threads
of the platform's own libraries (macOS), `fork_available()` is false and the server
computes heavy requests on the engine thread instead, as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import math
import os
import signal
import stat
import sys
import warnings
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass, field

Work = Callable[[], bytes]  # runs in the child; its bytes are the child's answer


def fork_available() -> bool:
    """Whether heavy requests can run in forked children here (Linux and the BSDs)."""
    return hasattr(os, "fork") and sys.platform.startswith(("linux", "freebsd", "openbsd"))


@dataclass(eq=False)
class Child:
    """A forked child computing one request: its process id and the pipe it writes."""

    pid: int
    fd: int  # the read end of the child's pipe (the parent's only copy)
    reaped: bool = False

    def kill(self) -> None:
        """SIGKILL the child and reap it (a no-op once it is reaped)."""
        if self.reaped:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)
        self.reap(block=True)

    def reap(self, block: bool = False) -> bool:
        """Collect the child's exit status (without blocking unless `block`); whether
        it is gone."""
        if not self.reaped:
            try:
                pid, _ = os.waitpid(self.pid, 0 if block else os.WNOHANG)
            except ChildProcessError:  # reaped elsewhere
                pid = self.pid
            self.reaped = pid == self.pid
        return self.reaped


@dataclass(frozen=True)
class Outcome:
    """How a child ended: the bytes it wrote (none: it crashed, or the kernel killed
    it), or that it was killed at its deadline or for writing too much."""

    data: bytes
    timed_out: bool = False
    too_large: bool = False


def spawn(work: Work, seconds: float | None, memory: int | None) -> Child:
    """Fork a child that runs `work` and writes what it returns to a pipe.

    Call on the thread that owns the database (the engine thread), between two
    requests. `seconds`: the child's alarm (it is killed by the kernel past it,
    even if nobody kills it before); `memory`: bytes of address space the child may
    add to what the server has (None: no limit)."""
    read, write = os.pipe()
    parent = os.getpid()
    with warnings.catch_warnings():  # Python 3.12+ warns of forking with threads: see
        warnings.simplefilter("ignore", DeprecationWarning)  # the module's docstring
        pid = os.fork()
    if pid == 0:  # the child: never returns
        try:
            os.close(read)
            _die_with(parent)
            _prepare_child(seconds, memory, keep=write)
            _write_all(write, work())
        finally:
            os._exit(0)
    os.close(write)
    return Child(pid, read)


def _die_with(parent: int) -> None:
    """Have the kernel kill this child when the thread that forked it ends (Linux:
    the server stopped or died, even without a budget's alarm); leave at once if it
    is gone already."""
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:
        os._exit(0)


def _prepare_child(seconds: float | None, memory: int | None, keep: int) -> None:
    gc.freeze()  # a collection would touch (so copy) every object the parent has
    warnings.simplefilter("ignore")  # printing one would take stderr's lock, which
    # another thread of the parent may have held at the fork
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_DFL)
    with contextlib.suppress(ValueError, OSError):
        signal.set_wakeup_fd(-1)
    for fd in _socket_fds():
        if fd != keep:
            with contextlib.suppress(OSError):
                os.close(fd)
    if seconds is not None:
        signal.alarm(max(1, math.ceil(seconds)))
    if memory is not None:
        _limit_memory(memory)


def _socket_fds() -> Iterable[int]:
    """The process's open file descriptors that are sockets."""
    try:
        candidates: Iterable[int] = [int(name) for name in os.listdir("/proc/self/fd")]
    except OSError:
        candidates = range(3, 4096)
    found = []
    for fd in candidates:
        with contextlib.suppress(OSError):
            if stat.S_ISSOCK(os.fstat(fd).st_mode):
                found.append(fd)
    return found


def _limit_memory(extra: int) -> None:
    """Allow the child `extra` bytes of address space beyond what it has now."""
    import resource

    with contextlib.suppress(ValueError, OSError):  # no /proc (the BSDs): no limit
        with open("/proc/self/statm", "rb") as statm:
            size = int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
        resource.setrlimit(resource.RLIMIT_AS, (size + extra, size + extra))


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


async def collect(child: Child, timeout: float | None, limit: int) -> Outcome:
    """On the event loop: what `child` writes until it exits, killing it after
    `timeout` seconds or once it has written more than `limit` bytes."""
    loop = asyncio.get_running_loop()
    chunks: list[bytes] = []
    size = 0
    ended: asyncio.Future[bool] = loop.create_future()  # True: wrote too much

    def readable() -> None:
        nonlocal size
        try:
            data = os.read(child.fd, 1 << 20)
        except (BlockingIOError, InterruptedError):
            return
        if not data or size + len(data) > limit:
            if not ended.done():
                ended.set_result(bool(data))
            return
        chunks.append(data)
        size += len(data)

    os.set_blocking(child.fd, False)
    loop.add_reader(child.fd, readable)
    try:
        too_large = await asyncio.wait_for(asyncio.shield(ended), timeout)
    except TimeoutError:
        child.kill()
        return Outcome(b"", timed_out=True)
    finally:
        loop.remove_reader(child.fd)
        os.close(child.fd)
    if too_large:
        child.kill()
        return Outcome(b"", too_large=True)
    await _reaped(child)
    return Outcome(b"".join(chunks))


async def _reaped(child: Child) -> None:
    """Wait (without blocking the loop) for a child that closed its pipe to exit."""
    delay = 0.0005
    while not child.reap():
        await asyncio.sleep(delay)
        delay = min(delay * 2, 0.05)


@dataclass
class Workers:
    """How many children may compute at once, in all and per client address (0: no
    limit of its own); requests beyond that wait their turn in arrival order (a
    client's turn is skipped while its address is at its limit). Loopback clients all
    share one address: a limit per address would let one local client's heavy
    requests hold up every other local client's, so there is none by default."""

    limit: int = 2
    per_client: int = 0  # 0: as many as `limit`
    running: dict[str, int] = field(default_factory=dict)
    children: set[Child] = field(default_factory=set)
    waiting: deque[tuple[str, asyncio.Future[None]]] = field(default_factory=deque)

    @property
    def enabled(self) -> bool:
        return self.limit > 0 and fork_available()

    @contextlib.asynccontextmanager
    async def slot(self, client: str) -> AsyncIterator[None]:
        """Hold one of the children's places for `client` (an address) meanwhile."""
        if self._free(client):
            self._take(client)
        else:
            waiter = asyncio.get_running_loop().create_future()
            self.waiting.append((client, waiter))
            try:
                await waiter  # `_wake` took the place for us
            except BaseException:
                if waiter.done() and not waiter.cancelled():
                    self._give(client)  # woken, then cancelled: pass the place on
                else:
                    self.waiting.remove((client, waiter))
                raise
        try:
            yield
        finally:
            self._give(client)

    def _free(self, client: str) -> bool:
        busy = sum(self.running.values())
        per_client = self.per_client or self.limit
        return busy < self.limit and self.running.get(client, 0) < per_client

    def _take(self, client: str) -> None:
        self.running[client] = self.running.get(client, 0) + 1

    def _give(self, client: str) -> None:
        self.running[client] -= 1
        if not self.running[client]:
            del self.running[client]
        self._wake()

    def _wake(self) -> None:
        """Give free places to the first waiters whose client is under its limit."""
        for client, waiter in list(self.waiting):
            if self._free(client):
                self.waiting.remove((client, waiter))
                self._take(client)
                waiter.set_result(None)

    def kill_all(self) -> None:
        """Kill every child now (the server is stopping)."""
        for child in list(self.children):
            child.kill()
        self.children.clear()
