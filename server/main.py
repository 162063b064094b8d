"""`deltalog serve`: serve one database over WebSocket.

Layer: server — may import only the public API of datalog. `datalog.cli.commands` reaches
this module by name at run time (docs/adr/0006-server-entry-point.md), so the
core never imports the server.

    deltalog serve [--host 127.0.0.1] [--port 6262] [--token TOKEN] [--db DIR]
                   [--program F.dl [-F FACTS_DIR]] [--functors F.py] [--ready-file PATH] ...

Start-up: the options are checked and the port is bound first (an IP address is
bound before the engine is even imported, so a client that connects at once waits
instead of being refused), then the database is opened and the program defined; a
missing or bad file is an error before anything is served. Once the server accepts
connections it prints `ready URL` on stdout and writes the URL to `--ready-file`.
"""

from __future__ import annotations

import argparse
import contextlib
import ipaddress
import os
import socket
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from datalog import Database
    from server.transport import DeltalogServer

MIN_WEBSOCKETS = 13  # websockets.asyncio (the server and the client use it) is new in 13
INSTALL = (
    "install the server extra: from a clone of Deltalog, pip install -e '.[server]' "
    "(it installs websockets 13 or later)"
)


class StartupError(Exception):
    """Why the server cannot start: the whole message for the operator."""


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="deltalog serve",
        description="Serve a Deltalog database over WebSocket (docs/protocol.md).",
    )
    add = parser.add_argument
    add("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    add("--port", type=int, default=6262, help="port (default 6262; 0 = any)")
    add(
        "--token",
        default=os.environ.get("DELTALOG_TOKEN"),
        help="clients must first send {type: auth, token} (default: $DELTALOG_TOKEN, or none)",
    )
    add("--db", type=Path, help="a durable database directory (default: in memory only)")
    add(
        "--program",
        type=Path,
        metavar="FILE.dl",
        help="a Datalog program to define at start (unless the database has it already)",
    )
    add(
        "-F",
        "--fact-dir",
        type=Path,
        metavar="DIR",
        help="with --program: load its .input files from DIR, as `deltalog run -F`",
    )
    add(
        "--functors",
        type=Path,
        action="append",
        default=[],
        metavar="FILE.py",
        help="bind `.functor`s to the functions of this Python file (may be repeated)",
    )
    add(
        "--ready-file",
        type=Path,
        metavar="PATH",
        help="write the server's URL to PATH once it accepts connections (removed at exit)",
    )
    add(
        "--allow-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="let browser pages from ORIGIN (e.g. https://app.example) connect; '*': any "
        "(default: only the server's own page, and clients that are not browsers)",
    )
    add("--history", type=int, default=1000, help="changed epochs kept per query")
    add(
        "--as-of-epochs",
        type=_epochs,
        default=1000,
        metavar="N",
        help="epochs the database keeps readable by `as_of` queries (default 1000; 'all')",
    )
    add(
        "--budget",
        type=float,
        default=30.0,
        help="seconds a request may compute before it is stopped (default 30; 0: no limit)",
    )
    add(
        "--slice",
        type=float,
        default=0.1,
        help="seconds a request may hold the engine before it moves to a worker process "
        "(default 0.1; 0: never moves)",
    )
    add(
        "--workers",
        type=int,
        default=2,
        help="worker processes computing heavy requests at once (default 2; 0: none)",
    )
    add(
        "--workers-per-address",
        type=int,
        default=0,
        help="of those, for the connections from one client address (default 0: any)",
    )
    add(
        "--worker-mb",
        type=int,
        default=2048,
        help="megabytes a worker may allocate beyond the server's (default 2048; 0: any)",
    )
    add(
        "--rate",
        type=float,
        default=0.0,
        help="requests per second per connection, in bursts as large (default 0: no limit)",
    )
    add("--max-rows", type=int, default=1_000_000, help="rows of one answer or snapshot at most")
    add("--outbox", type=int, default=1000, help="queued messages per client")
    add("--outbox-mb", type=int, default=64, help="queued megabytes per client (then dropped)")
    add(
        "--linger-mb",
        type=int,
        default=64,
        help="megabytes of unwatched feeds kept for resuming clients (default 64)",
    )
    return parser  # fmt: skip


def websockets_problem() -> str | None:
    """Why the installed `websockets` cannot serve (missing, or older than 13, which
    has no `websockets.asyncio`), or None."""
    try:
        import websockets
    except ImportError:
        return "the server needs websockets, which is not installed"
    found = str(getattr(websockets, "__version__", "0"))
    major = found.split(".")[0]
    if not major.isdigit() or int(major) < MIN_WEBSOCKETS:
        return f"the server needs websockets {MIN_WEBSOCKETS} or later, found {found}"
    return None


def _epochs(text: str) -> int | None:
    """`--as-of-epochs`: a count of epochs, or `all` (None: keep every epoch)."""
    if text == "all":
        return None
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"expected a number of epochs or 'all', not {text!r}")
    return int(text)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the server until SIGINT/SIGTERM; returns the exit status."""
    args = parser().parse_args(argv)
    problem = websockets_problem()
    if problem is not None:
        print(f"error: {problem}; {INSTALL}", file=sys.stderr)
        return 1
    if args.fact_dir is not None and args.program is None:
        print("error: -F loads the .input files of --program: give both", file=sys.stderr)
        return 1
    if args.ready_file is not None:
        with contextlib.suppress(FileNotFoundError):
            args.ready_file.unlink()  # a stale one would say "ready" too early
    try:
        sock = listening_socket(args.host, args.port)
    except OSError as error:  # the port is taken, or the address is not ours
        print(f"error: cannot listen on {args.host}:{args.port}: {error.strerror}", file=sys.stderr)
        return 1
    try:
        server = _server(args, open_database(args))
    except StartupError as error:
        print(error, file=sys.stderr)
        if sock is not None:
            sock.close()
        return 1
    import asyncio  # here: the port is bound before anything else loads

    status = asyncio.run(_serve(server, sock, args.ready_file))
    if server.engine.thread.is_alive():  # stuck in a step that cannot be interrupted:
        sys.stdout.flush()  # leave without waiting for it (a durable database's log
        sys.stderr.flush()  # has every committed epoch already)
        os._exit(status)
    return status


def listening_socket(host: str, port: int) -> socket.socket | None:
    """A socket bound to `host` (an IP address) and listening, or None for a name
    (which may stand for several addresses: the server binds them when it starts)."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return None
    family = socket.AF_INET6 if address.version == 6 else socket.AF_INET
    return socket.create_server((host, port), family=family)


def open_database(args: argparse.Namespace) -> Database:
    """The database to serve, with the program (and its facts) defined; any problem
    with a file is a `StartupError` saying which and why."""
    from datalog import Database, DatalogError, functors_in_file

    try:
        functors: dict[str, object] = {}
        for path in args.functors:
            functors.update(functors_in_file(path))
        db = Database(args.db, functors=functors, history=args.as_of_epochs)
        if args.program is not None:
            define_program(db, args.program, args.fact_dir)
    except DatalogError as error:
        raise StartupError(error.format()) from None
    except OSError as error:
        raise StartupError(f"error: {error.strerror or error}: {error.filename or ''}") from None
    return db


def define_program(db: Database, path: Path, fact_dir: Path | None) -> None:
    """Define the program in `path`, unless the database has it already (a durable
    one reopened), then load its `.input` files from `fact_dir` if given."""
    from datalog.io.sources.csv import load_inputs

    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise StartupError(f"error: --program {path}: {error.strerror}") from None
    except UnicodeDecodeError as error:
        message = f"error: --program {path} is not UTF-8 text (at byte {error.start})"
        raise StartupError(message) from None
    if any(definition.text == text for definition in db.definitions):
        return  # defined, and its facts loaded, when the database was made
    db.define(text)
    if fact_dir is not None:
        if not fact_dir.is_dir():
            raise StartupError(f"error: -F {fact_dir}: no such directory")
        load_inputs(db, fact_dir)


def _server(args: argparse.Namespace, db: Database) -> DeltalogServer:
    import logging

    from server.feeds import HistoryLimits
    from server.transport import DeltalogServer, Limits

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    history = HistoryLimits(
        epochs=args.history, seconds=args.budget or None, answer_rows=args.max_rows,
        slice=args.slice or None, worker_memory=(args.worker_mb << 20) or None,
        lingering_bytes=args.linger_mb << 20,
    )  # fmt: skip
    limits = Limits(
        outbox=args.outbox, outbox_bytes=args.outbox_mb << 20, rate=args.rate,
        workers=args.workers, workers_per_address=args.workers_per_address,
        allow_origins=tuple(args.allow_origin),
    )  # fmt: skip
    return DeltalogServer(db, args.host, args.port, args.token, history, limits)


async def _serve(server: DeltalogServer, sock: socket.socket | None, ready: Path | None) -> int:
    try:
        await server.start(sock)
    except OSError as error:  # the port is taken, or the address is not ours
        print(f"error: cannot listen on {server.address}: {error.strerror}", file=sys.stderr)
        return 1

    def say_ready() -> None:  # once SIGTERM is caught: a supervisor may send it at once
        auth = "token required" if server.hub.token else "no authentication"
        print(f"deltalog serving on {server.url} ({auth}); Ctrl-C stops", file=sys.stderr)
        print(f"live page: {server.page_url}", file=sys.stderr, flush=True)
        if ready is not None:
            _write_ready(ready, server.url)
        print(f"ready {server.url}", flush=True)

    try:
        await server.stop_on_signal(say_ready)
    finally:
        if ready is not None:
            with contextlib.suppress(OSError):
                ready.unlink()
    print("deltalog server stopped", file=sys.stderr, flush=True)
    return 0


def _write_ready(path: Path, url: str) -> None:
    """Write the URL to `path` at once (a reader never sees half of it)."""
    partial = path.with_name(path.name + ".partial")
    partial.write_text(url + "\n", encoding="utf-8")
    os.replace(partial, path)


if __name__ == "__main__":
    sys.exit(main())
