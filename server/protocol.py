"""The wire protocol: parse and validate requests, build replies and errors.

Layer: server — may import only the public API of datalog. No I/O here: this
module turns one JSON text frame into a typed `Request` (or a `ProtocolError`
saying what is wrong with it) and builds the JSON objects the server sends.
docs/protocol.md is the user-facing description of every message.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

from datalog import DatalogError, DatalogErrors

CATEGORIES = ("incorrect", "not_found", "conflict", "unsupported", "fault")
PLANS = ("auto", "wcoj", "binary")
MAX_ID_LENGTH = 200
MAX_WHY_DEPTH = 10  # levels of nested explanations a `why_not` may ask for

Rows = dict[str, list[tuple[Any, ...]]]
RequestId = str | int | None


class ProtocolError(Exception):
    """A request the server cannot act on; becomes a JSON error reply."""

    def __init__(self, message: str, category: str = "incorrect", request_id: RequestId = None):
        super().__init__(message)
        assert category in CATEGORIES
        self.message = message
        self.category = category
        self.request_id = request_id

    def to_dict(self) -> dict[str, object]:
        return {"category": self.category, "message": self.message}


@dataclass(frozen=True)
class Granularity:
    """Deliver consolidated changes at most every `epochs` epochs or `seconds` seconds."""

    epochs: int = 0
    seconds: float = 0.0

    @property
    def immediate(self) -> bool:
        return self.epochs <= 1 and self.seconds <= 0


@dataclass(frozen=True)
class Request:
    """One validated request. `fields` holds the type-specific, checked payload."""

    type: str
    id: RequestId
    fields: dict[str, Any] = field(default_factory=dict)


# --- parsing ---------------------------------------------------------------------------


def parse_request(frame: str | bytes) -> Request:
    """The request in one text frame; raises `ProtocolError` naming the problem."""
    if isinstance(frame, bytes):
        raise ProtocolError("binary frames are not supported; send JSON text frames")
    try:
        message = json.loads(frame)
    except (ValueError, RecursionError) as exc:
        raise ProtocolError(f"malformed JSON: {str(exc)[:200]}") from None
    if not isinstance(message, dict):
        raise ProtocolError("a request must be a JSON object")
    request_id = _request_id(message.get("id"))
    kind = message.get("type")
    parser = _PARSERS.get(kind) if isinstance(kind, str) else None
    if parser is None:
        known = ", ".join(sorted(_PARSERS))
        message = f"unknown request type {kind!r}; expected one of {known}"
        raise ProtocolError(message, "unsupported", request_id)
    try:
        return Request(kind, request_id, parser(message))  # type: ignore[arg-type]
    except ProtocolError as error:
        error.request_id = request_id
        raise


def _request_id(value: object) -> RequestId:
    if value is None or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    if isinstance(value, str) and len(value) <= MAX_ID_LENGTH:
        return value
    raise ProtocolError(f"`id` must be an integer or a string of at most {MAX_ID_LENGTH} chars")


def _text(message: dict[str, Any], name: str = "text") -> str:
    value = message.get(name)
    if not isinstance(value, str):
        raise ProtocolError(f"`{name}` must be a string of Datalog text")
    return value


def _plan(message: dict[str, Any]) -> str:
    plan = message.get("plan", "auto")
    if plan not in PLANS:
        raise ProtocolError(f"`plan` must be one of {', '.join(PLANS)}")
    return str(plan)


def _rows(message: dict[str, Any], name: str) -> Rows:
    value = message.get(name, {})
    if not isinstance(value, dict):
        raise ProtocolError(f"`{name}` must be an object of relation name to a list of rows")
    rows: Rows = {}
    for relation, items in value.items():
        if not isinstance(items, list) or not all(isinstance(r, list) for r in items):
            raise ProtocolError(f"`{name}.{relation}` must be a list of rows (lists of values)")
        rows[relation] = [tuple(map(_value, r)) for r in items]
    return rows


def _value(value: object) -> object:
    """A JSON scalar as a column value: numbers and strings only."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ProtocolError(f"a value must be a number or a string, not {json.dumps(value)[:40]}")
    return value


def _granularity(message: dict[str, Any]) -> Granularity:
    """`{"epochs": N}`, `{"seconds": S}` or both (then the later bound decides, as
    the database paces its own subscribers: `datalog.Pacing`)."""
    value = message.get("granularity")
    if value is None:
        return Granularity()
    if not isinstance(value, dict) or not value or set(value) - {"epochs", "seconds"}:
        raise ProtocolError(
            '`granularity` must be {"epochs": N}, {"seconds": S} or {"epochs": N, "seconds": S}'
        )
    epochs, seconds = value.get("epochs", 1), value.get("seconds", 0)
    whole = isinstance(epochs, int) and not isinstance(epochs, bool) and epochs >= 1
    timed = "seconds" not in value or (_positive(seconds) and float(seconds) <= 86400)
    if not whole or not timed:
        raise ProtocolError(
            "granularity: `epochs` must be an integer >= 1, `seconds` in (0, 86400]"
        )
    return Granularity(epochs=epochs, seconds=float(seconds))


def _positive(value: object) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value > 0
    )


def _optional_int(message: dict[str, Any], name: str) -> int | None:
    value = message.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ProtocolError(f"`{name}` must be a non-negative integer")
    return value


def _as_of(message: dict[str, Any]) -> int | None:
    """An optional epoch to answer as of (the database checks that it is readable)."""
    value = message.get("as_of")
    if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
        raise ProtocolError("`as_of` must be an epoch number (an integer)")
    return value


def _parse_define(m: dict[str, Any]) -> dict[str, Any]:
    return {"text": _text(m)}


def _parse_transact(m: dict[str, Any]) -> dict[str, Any]:
    return {
        "inserts": _rows(m, "inserts"),
        "retracts": _rows(m, "retracts"),
        "redefine": _redefinitions(m.get("redefine", {})),
    }


def _parse_redefine(m: dict[str, Any]) -> dict[str, Any]:
    relation = m.get("relation")
    if not isinstance(relation, str) or not relation:
        raise ProtocolError("`relation` must be the name of the relation whose rules to replace")
    return {**_parse_transact({**m, "redefine": {}}), "redefine": {relation: _text(m)}}


def _redefinitions(value: object) -> dict[str, str]:
    """`{relation: rules text}`: the rules each relation gets instead of its own."""
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and k and isinstance(v, str) for k, v in value.items()
    ):
        raise ProtocolError("`redefine` must be an object of relation name to Datalog rules text")
    return value


def _parse_query(m: dict[str, Any]) -> dict[str, Any]:
    return {"text": _text(m), "plan": _plan(m), "as_of": _as_of(m)}


def _parse_explain(m: dict[str, Any]) -> dict[str, Any]:
    explained = m.get("format", "text")
    if explained not in ("text", "dot"):
        raise ProtocolError('`format` must be "text" or "dot" (a Graphviz digraph)')
    passes = m.get("passes", False)
    if not isinstance(passes, bool):
        raise ProtocolError("`passes` must be true (the plan after each pass) or false")
    return {"text": _text(m), "plan": _plan(m), "format": explained, "passes": passes}


def _parse_subscribe(m: dict[str, Any]) -> dict[str, Any]:
    instance = m.get("instance")
    if instance is not None and not isinstance(instance, str):
        raise ProtocolError("`instance` must be the string a snapshot carried")
    return {
        "text": _text(m),
        "plan": _plan(m),
        "granularity": _granularity(m),
        "resume_from": _optional_int(m, "resume_from"),
        "instance": instance,
    }


def _parse_why(m: dict[str, Any]) -> dict[str, Any]:
    return {"fact": _text(m, "fact"), "as_of": _as_of(m)}


def _parse_why_not(m: dict[str, Any]) -> dict[str, Any]:
    depth = _optional_int(m, "depth")
    if depth is not None and depth > MAX_WHY_DEPTH:
        raise ProtocolError(f"`depth` must be an integer from 0 to {MAX_WHY_DEPTH}")
    return {"fact": _text(m, "fact"), "as_of": _as_of(m), "depth": 3 if depth is None else depth}


def _parse_what_if(m: dict[str, Any]) -> dict[str, Any]:
    queries = m.get("queries")
    if queries is not None and (
        not isinstance(queries, list) or not all(isinstance(q, str) and q for q in queries)
    ):
        raise ProtocolError("`queries` must be a list of query texts")
    return {"inserts": _rows(m, "inserts"), "retracts": _rows(m, "retracts"), "queries": queries}


def _parse_subscribe_why(m: dict[str, Any]) -> dict[str, Any]:
    return {"fact": _text(m, "fact"), "granularity": _granularity(m)}


def _parse_unsubscribe(m: dict[str, Any]) -> dict[str, Any]:
    subscription = _optional_int(m, "subscription")
    if subscription is None:
        raise ProtocolError("`subscription` must be the number a snapshot carried")
    return {"subscription": subscription}


def _parse_auth(m: dict[str, Any]) -> dict[str, Any]:
    return {"token": _text(m, "token")}


def _parse_nothing(m: dict[str, Any]) -> dict[str, Any]:
    return {}


_PARSERS = {
    "auth": _parse_auth,
    "define": _parse_define,
    "transact": _parse_transact,
    "redefine": _parse_redefine,
    "query": _parse_query,
    "subscribe": _parse_subscribe,
    "unsubscribe": _parse_unsubscribe,
    "explain": _parse_explain,
    "why": _parse_why,
    "why_not": _parse_why_not,
    "subscribe_why": _parse_subscribe_why,
    "what_if": _parse_what_if,
    "stats": _parse_nothing,
    "ping": _parse_nothing,
}
REQUEST_TYPES = tuple(_PARSERS)


# --- replies ---------------------------------------------------------------------------


def reply(request: Request, kind: str, **body: Any) -> dict[str, Any]:
    return {"type": kind, "id": request.id, **body}


def error_reply(error: Exception, request_id: RequestId = None) -> dict[str, Any]:
    """The JSON error for any exception: user errors keep their category and position."""
    if isinstance(error, ProtocolError):
        detail = error.to_dict()
        request_id = error.request_id if request_id is None else request_id
    elif isinstance(error, DatalogError):
        detail = error.to_dict()
        if detail.get("line", 0) <= 0:  # type: ignore[operator]
            detail.pop("line", None)
            detail.pop("column", None)
        if isinstance(error, DatalogErrors) and len(error.errors) > 1:
            detail["errors"] = [e.to_dict() for e in error.errors]
    else:
        detail = {"category": "fault", "message": f"internal error: {type(error).__name__}"}
    return {"type": "error", "id": request_id, "error": detail}


def encode(message: dict[str, Any]) -> str:
    """JSON text of a message (non-JSON values such as numpy scalars become strings)."""
    return json.dumps(message, separators=(",", ":"), default=_default)


def _default(value: object) -> object:
    item = getattr(value, "item", None)  # numpy scalars
    if callable(item):
        return item()
    return str(value)
