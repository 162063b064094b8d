"""Explanations over the wire: the `why_not`, `subscribe_why` and `what_if` requests.

Layer: server — may import only the public API of datalog.

`why_not` answers one explanation (`Database.why_not`). `subscribe_why` subscribes
the connection to a fact's explanation (`Database.subscribe_why`): the reply is a
`why_snapshot`, then a `why_change` is sent, inside the commit that causes it (so
before that commit's reply), at each epoch where the explanation changes. Its pacing
runs on the server host's clock, on the engine thread (docs/protocol.md). `what_if`
answers the changes a transaction would deliver, committing nothing
(`Database.what_if`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from datalog import Clock, Database, WhyChange, WhySubscription
from server.protocol import ProtocolError, Request, encode, reply


def absence(db: Database, request: Request, epoch: int) -> dict[str, Any]:
    """The reply to `why_not`: `{type: "absence", absence, text, epoch}`."""
    fields = request.fields
    found = db.why_not(fields["fact"], as_of=fields["as_of"], depth=fields["depth"])
    return reply(request, "absence", absence=found.to_dict(), text=str(found), epoch=epoch)


def subscribe(
    db: Database,
    request: Request,
    number: int,
    send: Callable[[str], None],
    budget: float | None,
    clock: Clock,
) -> tuple[WhySubscription, dict[str, Any]]:
    """The database subscription (its changes `send` as `why_change` messages) and the
    `why_snapshot` reply."""

    def changed(change: WhyChange) -> None:
        if not change.snapshot:
            send(encode(message({"type": "why_change", "subscription": number}, change)))

    paced = request.fields["granularity"]
    granularity = None if paced.immediate else {"epochs": max(paced.epochs, 1),
                                                "seconds": paced.seconds}  # fmt: skip
    sub = db.subscribe_why(request.fields["fact"], changed, granularity, budget, clock=clock)
    assert sub.latest is not None
    try:
        first = message(reply(request, "why_snapshot", subscription=number), sub.latest)
    except BaseException:
        db.unsubscribe_why(sub)
        raise
    return sub, first


def message(head: dict[str, Any], change: WhyChange) -> dict[str, Any]:
    """`head` with the explanation at its epoch: `{epoch, fact, holds, explanation,
    text}`; one too deep to nest in JSON is an `incorrect` error."""
    explanation = change.explanation
    body = {**head, "epoch": change.epoch, "fact": change.fact, "holds": change.holds,
            "explanation": explanation.to_dict(), "text": str(explanation)}  # fmt: skip
    try:
        encode(body)
    except RecursionError:  # JSON nests objects only as deep as Python recurses
        raise ProtocolError(
            "the proof is too deep to send as nested JSON; use the Python API, or ask "
            "about a tuple closer to the base facts"
        ) from None
    return body


def what_if(db: Database, request: Request) -> dict[str, Any]:
    """The reply to `what_if`: `{type: "what_if", epoch, changes: {query: {columns,
    rows, diffs}}}`, `epoch` being the one committing would take."""
    fields = request.fields
    found = db.what_if(fields["inserts"], fields["retracts"], fields["queries"])
    changes = {text: {"columns": list(change.columns), "rows": change.rows,
                      "diffs": change.diffs} for text, change in found.items()}  # fmt: skip
    return reply(request, "what_if", epoch=db.epoch + 1, changes=changes)
