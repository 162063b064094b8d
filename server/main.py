"""`deltalog serve`: serve one database over WebSocket.

Layer: server — may import only the public API of datalog. `datalog.cli` reaches
this module by name at run time (docs/adr/0006-server-entry-point.md), so the
core never imports the server.

    deltalog serve [--host 127.0.0.1] [--port 6262] [--token TOKEN] [--db DIR] [--program F.dl]
                   [--functors F.py]
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from server.transport import DeltalogServer

MIN_WEBSOCKETS = 13  # websockets.asyncio (the server and the client use it) is new in 13


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="deltalog serve",
        description="Serve an in-memory Deltalog database over WebSocket (docs/protocol.md).",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=6262, help="port (default 6262; 0 = any)")
    parser.add_argument(
        "--token",
        default=os.environ.get("DELTALOG_TOKEN"),
        help="clients must first send {type: auth, token} (default: $DELTALOG_TOKEN, or none)",
    )
    parser.add_argument(
        "--db", type=Path, help="a durable database directory (default: in memory only)"
    )
    parser.add_argument(
        "--program", type=Path, help="a Datalog program to define at start (if not yet defined)"
    )
    parser.add_argument(
        "--functors", type=Path, action="append", default=[], metavar="FILE.py",
        help="bind `.functor`s to the functions of this Python file (may be repeated)",
    )  # fmt: skip
    parser.add_argument("--history", type=int, default=1000, help="changed epochs kept per query")
    parser.add_argument(
        "--as-of-epochs", type=_epochs, default=1000, metavar="N",
        help="epochs the database keeps readable by `as_of` queries (default 1000; 'all')",
    )  # fmt: skip
    parser.add_argument(
        "--budget", type=float, default=30.0,
        help="seconds a request may compute before it is stopped (default 30; 0: no limit)",
    )  # fmt: skip
    parser.add_argument(
        "--max-rows", type=int, default=1_000_000, help="rows of one answer or snapshot at most"
    )
    parser.add_argument("--outbox", type=int, default=1000, help="queued messages per client")
    parser.add_argument(
        "--outbox-mb", type=int, default=64, help="queued megabytes per client (then dropped)"
    )
    return parser


def websockets_problem() -> str | None:
    """Why the installed `websockets` cannot serve (missing, or older than 13, which
    has no `websockets.asyncio`), or None."""
    try:
        import websockets
    except ImportError:
        return "the server needs websockets"
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
        print(f"error: {problem}: pip install 'deltalog[server]'", file=sys.stderr)
        return 1
    from datalog import Database, DatalogError, functors_in_file
    from server.feeds import HistoryLimits
    from server.transport import DeltalogServer, Limits

    try:
        functors: dict[str, object] = {}
        for path in args.functors:
            functors.update(functors_in_file(path))
        db = Database(args.db, functors=functors, history=args.as_of_epochs)
        if args.program is not None and not db.program.decls:
            db.define(args.program.read_text(encoding="utf-8"))
    except (OSError, DatalogError) as error:
        message = error.format() if isinstance(error, DatalogError) else str(error)
        print(message, file=sys.stderr)
        return 1
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    server = DeltalogServer(
        db, args.host, args.port, args.token,
        HistoryLimits(epochs=args.history, seconds=args.budget or None,
                      answer_rows=args.max_rows),
        Limits(outbox=args.outbox, outbox_bytes=args.outbox_mb << 20),
    )  # fmt: skip
    return asyncio.run(_serve(server))


async def _serve(server: DeltalogServer) -> int:
    try:
        await server.start()
    except OSError as error:  # the port is taken, or the address is not ours
        print(f"error: cannot listen on {server.address}: {error.strerror}", file=sys.stderr)
        return 1
    auth = "token required" if server.hub.token else "no authentication"
    print(f"deltalog serving on {server.url} ({auth}); Ctrl-C stops", file=sys.stderr)
    print(f"live page: {server.page_url}", file=sys.stderr, flush=True)
    await server.stop_on_signal()
    print("deltalog server stopped", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
