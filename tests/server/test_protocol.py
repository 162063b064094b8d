"""The protocol core without a network: request validation and the hub's dispatch."""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest

from datalog import Database
from server import feeds
from server.feeds import HistoryLimits
from server.protocol import ProtocolError, parse_request
from server.session import Hub, Session
from tests.server.helpers import GRAPH, FakeHost

pytestmark = pytest.mark.server


@pytest.mark.parametrize(
    ("frame", "category", "fragment"),
    [
        ("{not json", "incorrect", "malformed JSON"),
        ("[1, 2]", "incorrect", "JSON object"),
        (b"{}", "incorrect", "binary"),
        ('{"type": "frobnicate", "id": 1}', "unsupported", "unknown request type"),
        ('{"id": 1}', "unsupported", "unknown request type"),
        ('{"type": "define", "id": 1}', "incorrect", "`text`"),
        ('{"type": "transact", "inserts": {"edge": [1, 2]}}', "incorrect", "list of rows"),
        ('{"type": "transact", "inserts": {"edge": [[null, 2]]}}', "incorrect", "number or"),
        ('{"type": "transact", "inserts": [[1, 2]]}', "incorrect", "object of relation"),
        ('{"type": "query", "text": "e(x)", "plan": "fast"}', "incorrect", "`plan`"),
        ('{"type": "subscribe", "text": "e(x)", "granularity": {"epochs": 0}}', "incorrect", ""),
        ('{"type": "subscribe", "text": "e(x)", "granularity": {"seconds": -1}}', "incorrect", ""),
        ('{"type": "subscribe", "text": "e(x)", "resume_from": "3"}', "incorrect", "resume"),
        ('{"type": "unsubscribe", "id": 2}', "incorrect", "`subscription`"),
        ('{"type": "ping", "id": [1]}', "incorrect", "`id`"),
        ('{"type": "query", "text": "e(x)", "as_of": "3"}', "incorrect", "`as_of`"),
        ('{"type": "why", "fact": "e(1)", "as_of": 1.5}', "incorrect", "`as_of`"),
        ('{"type": "query", "text": "e(x)", "as_of": true}', "incorrect", "`as_of`"),
        ("[" * 100_000, "incorrect", "malformed JSON"),
    ],
)
def test_bad_requests_are_rejected_with_a_category(
    frame: str | bytes, category: str, fragment: str
) -> None:
    with pytest.raises(ProtocolError) as caught:
        parse_request(frame)
    assert caught.value.category == category
    assert fragment in caught.value.message


def test_the_request_id_survives_a_bad_payload() -> None:
    with pytest.raises(ProtocolError) as caught:
        parse_request('{"type": "define", "id": "abc", "text": 5}')
    assert caught.value.request_id == "abc"


def _hub(**options: Any) -> tuple[Hub, FakeHost, Session]:
    host = FakeHost()
    hub = Hub(Database(), host, **options)
    session = hub.open()
    hub.handle(session, json.dumps({"type": "define", "id": 0, "text": GRAPH}))
    host.take()
    return hub, host, session


def _send(hub: Hub, session: Session, **request: Any) -> None:
    hub.handle(session, json.dumps(request))


def test_a_commit_reaches_subscribers_before_its_reply() -> None:
    hub, host, session = _hub()
    _send(hub, session, type="subscribe", id=1, text="reach(1, y)")
    _send(hub, session, type="transact", id=2, inserts={"edge": [[1, 2], [2, 3]]})
    snapshot, change, reply = host.take()
    assert (snapshot["type"], snapshot["id"], snapshot["rows"]) == ("snapshot", 1, [])
    assert change == {"type": "change", "subscription": 1, "epoch": reply["epoch"],
                      "rows": [[2], [3]], "diffs": [1, 1]}  # fmt: skip
    assert (reply["type"], reply["id"]) == ("transacted", 2)


def test_a_rejected_transaction_changes_nothing_and_reports_where() -> None:
    hub, host, session = _hub()
    epoch = hub.db.epoch
    _send(hub, session, type="transact", id=1, inserts={"edge": [[1, 2]], "edg": [[1]]})
    _send(hub, session, type="transact", id=2, inserts={"edge": [[1, 2], [3]]})
    _send(hub, session, type="query", id=3, text="reach(x, y), edg(y)")
    unknown, arity, bad_query = host.take()
    assert unknown["error"]["category"] == "not_found" and "did you mean" in str(unknown)
    assert arity["error"]["category"] == "incorrect" and arity["id"] == 2
    assert (bad_query["error"]["line"], bad_query["error"]["column"]) == (1, 14)
    assert hub.db.epoch == epoch and hub.db.query("edge(x, y)") == []


def test_subscriptions_to_the_same_query_share_one_feed() -> None:
    hub, host, session = _hub()
    other = hub.open()
    _send(hub, session, type="subscribe", id=1, text="reach(1, y)")
    _send(hub, other, type="subscribe", id=1, text="reach(1,   y).")
    assert len(hub.feeds) == 1 and len(hub.db.stats()["queries"]) == 1  # type: ignore[arg-type]
    hub.close(session)
    hub.close(other)
    assert len(hub.feeds) == 1  # lingers for resumes
    host.fire()
    assert hub.feeds == {} and hub.db.stats()["queries"] == {}


def test_a_large_change_comes_in_parts_to_every_watcher(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(feeds, "CHUNK_ROWS", 2)
    hub, host, session = _hub()
    _send(hub, session, type="subscribe", id=1, text="reach(1, y)")
    _send(hub, session, type="subscribe", id=2, text="reach(1, y)")  # same feed, number 2
    _send(hub, session, type="transact", id=3, inserts={"edge": [[1, 2], [1, 3], [1, 4]]})
    *_, a1, a2, b1, b2, reply = host.take()
    part = {"type": "change", "epoch": reply["epoch"]}
    assert a1 == {**part, "subscription": 1, "rows": [[2], [3]], "diffs": [1, 1], "more": True}
    assert a2 == {**part, "subscription": 1, "rows": [[4]], "diffs": [1]}
    assert (b1, b2) == ({**a1, "subscription": 2}, {**a2, "subscription": 2})


def test_epoch_granularity_consolidates_and_waits_for_n_epochs() -> None:
    hub, host, session = _hub()
    _send(hub, session, type="subscribe", id=1, text="edge(x, y)", granularity={"epochs": 3})
    start = host.take()[0]["epoch"]
    _send(hub, session, type="transact", id=2, inserts={"edge": [[1, 2]]})
    _send(
        hub, session, type="transact", id=3, retracts={"edge": [[1, 2]]}, inserts={"edge": [[5, 6]]}
    )
    assert [m["type"] for m in host.take()] == ["transacted", "transacted"]
    _send(hub, session, type="transact", id=4, inserts={"edge": [[7, 8]]})
    change, _ = host.take()
    assert change["epoch"] == start + 3
    assert (change["rows"], change["diffs"]) == ([[5, 6], [7, 8]], [1, 1])


def test_resume_sends_exactly_the_changes_after_the_epoch_or_a_snapshot() -> None:
    hub, host, session = _hub(limits=HistoryLimits(epochs=3))
    _send(hub, session, type="subscribe", id=1, text="edge(x, y)")
    seen = host.take()[0]["epoch"]
    for i in range(2):
        _send(hub, session, type="transact", id=2, inserts={"edge": [[i, i]]})
    _send(hub, session, type="transact", id=3, retracts={"edge": [[0, 0]]})
    host.take()
    hub.close(session)
    again = hub.open()
    _send(hub, again, type="subscribe", id=4, text="edge(x, y)", resume_from=seen + 1,
          instance=hub.instance)  # fmt: skip
    (resumed,) = host.take()
    assert resumed["type"] == "resumed" and resumed["resumed"] is True
    assert (resumed["rows"], resumed["diffs"]) == ([[0, 0], [1, 1]], [-1, 1])
    _send(hub, again, type="subscribe", id=5, text="edge(x, y)", resume_from=seen - 1)
    _send(hub, again, type="subscribe", id=6, text="edge(x, y)", resume_from=seen,
          instance="elsewhere")  # fmt: skip
    compacted, restarted = host.take()
    assert (compacted["type"], compacted["resumed"]) == ("snapshot", False)
    assert compacted["reason"] == "history compacted" and compacted["rows"] == [[1, 1]]
    assert restarted["reason"] == "server restarted"


def test_without_the_token_nothing_is_served() -> None:
    host = FakeHost()
    hub = Hub(Database(), host, token="s3cret")
    session = hub.open()
    _send(hub, session, type="ping", id=1)
    assert host.take()[0]["error"]["message"].startswith("authentication required")
    assert host.closed == [(session.number, 1008)]
    good = hub.open()
    _send(hub, good, type="auth", id=1, token="s3cret")
    _send(hub, good, type="ping", id=2)
    assert [m["type"] for m in host.take()] == ["authenticated", "pong"]


def test_the_client_loads_no_engine() -> None:
    """`import server.client` needs only websockets, as docs/protocol.md promises."""
    import subprocess
    import sys

    code = (
        "import sys, server.client\n"
        "heavy = [m for m in ('numpy', 'lark', 'pyarrow', 'regex', 'differential', 'joins',"
        " 'datalog.db.database') if m in sys.modules]\n"
        "ours = sorted(m for m in sys.modules if m.partition('.')[0] == 'datalog')\n"
        "print(heavy, ours)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    # Change: stdlib only
    assert done.stdout.strip() == "[] ['datalog', 'datalog.db', 'datalog.db.change']"


def test_why_replies_with_the_proof_as_nested_json_and_text() -> None:
    hub, host, session = _hub()
    _send(hub, session, type="transact", id=1, inserts={"edge": [[1, 2], [2, 3]]})
    _send(hub, session, type="why", id=2, fact="reach(1, 3)")
    _send(hub, session, type="why", id=3, fact="reach(3, 1)")
    _send(hub, session, type="why", id=4, fact="reach(1, y)")
    _send(hub, session, type="why", id=5)
    _, proof, absent, open_fact, missing = host.take()
    assert (proof["type"], proof["id"], proof["epoch"]) == ("derivation", 2, hub.db.epoch)
    tree = proof["derivation"]
    assert (tree["fact"], tree["relation"], tree["values"], tree["height"]) == (
        "reach(1, 3)", "reach", [1, 3], 2)  # fmt: skip
    assert tree["rule"] == {"text": "reach(x, z) :- reach(x, y), edge(y, z).", "line": 5,
                            "column": 1}  # fmt: skip
    assert [p["fact"] for p in tree["premises"]] == ["reach(1, 2)", "edge(2, 3)"]
    assert tree["premises"][1]["rule"] is None and tree["premises"][1]["kind"] == "base"
    assert proof["text"] == str(hub.db.why("reach(1, 3)"))
    assert absent["error"]["category"] == "not_found" and "does not hold" in str(absent)
    assert (open_fact["error"]["category"], open_fact["error"]["column"]) == ("incorrect", 10)
    assert missing["error"]["category"] == "incorrect" and "`fact`" in str(missing)


def test_a_proof_too_deep_for_nested_json_is_an_error_not_a_fault() -> None:
    hub, host, session = _hub()
    _send(hub, session, type="transact", id=1, inserts={"edge": [[i, i + 1] for i in range(1200)]})
    _send(hub, session, type="why", id=2, fact="reach(0, 1200)")
    _send(hub, session, type="why", id=3, fact="reach(0, 300)")
    _, deep, shallow = host.take()
    assert deep["error"]["category"] == "incorrect" and "too deep" in deep["error"]["message"]
    assert shallow["derivation"]["height"] == 300


@pytest.mark.parametrize(
    ("frame", "fragment"),
    [
        ('{"type": "redefine", "text": "reach(x, y) :- edge(x, y)."}', "`relation`"),
        ('{"type": "redefine", "relation": "reach"}', "`text`"),
        ('{"type": "redefine", "relation": "", "text": ""}', "`relation`"),
        ('{"type": "transact", "redefine": {"reach": 5}}', "`redefine`"),
        ('{"type": "transact", "redefine": [["reach", ""]]}', "`redefine`"),
    ],
)
def test_bad_redefine_requests_are_rejected(frame: str, fragment: str) -> None:
    with pytest.raises(ProtocolError) as caught:
        parse_request(frame)
    assert caught.value.category == "incorrect" and fragment in caught.value.message


def test_a_redefinition_reaches_watchers_at_its_new_epoch_before_its_reply() -> None:
    hub, host, session = _hub()
    _send(hub, session, type="transact", id=1, inserts={"edge": [[1, 2], [2, 3]]})
    _send(hub, session, type="subscribe", id=2, text="reach(1, y)")
    _send(hub, session, type="subscribe", id=3, text="edge(x, y)")
    seen = host.take()[1]["epoch"]
    _send(hub, session, type="redefine", id=4, relation="reach", text="reach(x, y) :- edge(x, y).")
    change, reply = host.take()  # nothing for `edge(x, y)`: its answer did not change
    assert (reply["type"], reply["id"], reply["epoch"]) == ("redefined", 4, seen + 1)
    assert change == {"type": "change", "subscription": 1, "epoch": seen + 1, "rows": [[3]],
                      "diffs": [-1]}  # fmt: skip
    _send(hub, session, type="transact", id=5, inserts={"edge": [[3, 4]]},
          redefine={"reach": "reach(x, z) :- edge(x, y), edge(y, z)."})  # fmt: skip
    *changes, reply = host.take()
    for_reach, for_edge = sorted(changes, key=lambda m: m["subscription"])
    assert for_reach["epoch"] == for_edge["epoch"] == reply["epoch"] == seen + 2
    assert (for_reach["rows"], for_reach["diffs"]) == ([[2], [3]], [-1, 1])
    _send(hub, session, type="redefine", id=6, relation="reach", text="edge(x, y) :- reach(x, y).")
    (error,) = host.take()
    assert error["error"]["category"] == "incorrect" and error["error"]["line"] == 1
    assert hub.db.epoch == seen + 2
    hub.close(session)  # a client that saw the epoch before the redefinition resumes exactly
    again = hub.open()
    _send(hub, again, type="subscribe", id=7, text="reach(1, y)", resume_from=seen,
          instance=hub.instance)  # fmt: skip
    (resumed,) = host.take()
    assert resumed["type"] == "resumed" and resumed["epoch"] == seen + 2
    assert (resumed["rows"], resumed["diffs"]) == ([[2]], [-1])  # {2, 3} then, {3} now


def test_seconds_granularity_asks_for_a_timer_within_s_and_delivers_consolidated() -> None:
    hub, host, session = _hub()
    _send(hub, session, type="subscribe", id=1, text="edge(x, y)", granularity={"seconds": 5})
    host.take()
    _send(hub, session, type="transact", id=2, inserts={"edge": [[1, 2], [3, 4]]})
    _send(hub, session, type="transact", id=3, retracts={"edge": [[1, 2]]})
    _send(hub, session, type="transact", id=4, inserts={"edge": [[5, 6]]})
    assert [m["type"] for m in host.take()] == ["transacted"] * 3  # held, not sent
    ((delay, _),) = host.timers  # one timer for the buffer, due within the 5 seconds
    assert 0 < delay <= 5
    host.fire()
    (change,) = host.take()
    assert (change["rows"], change["diffs"], change["epoch"]) == (
        [[3, 4], [5, 6]], [1, 1], hub.db.epoch)  # fmt: skip
    _send(hub, session, type="transact", id=5, inserts={"edge": [[7, 8]]})
    ((delay, _),) = host.timers  # just delivered: the next one waits (almost) all 5 s
    assert 4 < delay <= 5


def test_explain_answers_text_or_a_graphviz_digraph_and_refuses_other_formats() -> None:
    hub, host, session = _hub()
    _send(hub, session, type="explain", id=1, text="reach(1, y)")
    _send(hub, session, type="explain", id=2, text="reach(1, y)", format="dot")
    _send(hub, session, type="explain", id=3, text="reach(1, y)", format="svg")
    text, dot, refused = host.take()
    assert text["type"] == "explanation" and text["text"].startswith("query reach(1, y)")
    assert dot["type"] == "explanation" and dot["text"].startswith('digraph "reach(1, y)" {')
    assert (refused["id"], refused["error"]["category"]) == (3, "incorrect")
    assert "`format`" in refused["error"]["message"]


def test_explain_with_passes_answers_the_plan_after_each_pass() -> None:
    hub, host, session = _hub()
    _send(hub, session, type="explain", id=1, text="reach(1, y)", passes=True)
    _send(hub, session, type="explain", id=2, text="reach(1, y)", passes="yes")
    _send(hub, session, type="explain", id=3, text="reach(1, y)", passes=True, format="dot")
    dump, refused, text_only = host.take()
    assert dump["type"] == "explanation"
    assert dump["text"] == hub.db.explain("reach(1, y)", passes=True)
    assert "-- after pass 6: order joins --" in dump["text"]
    assert (refused["id"], refused["error"]["category"]) == (2, "incorrect")
    assert "`passes`" in refused["error"]["message"]
    assert (text_only["id"], text_only["error"]["category"]) == (3, "unsupported")
    assert "passes=True" in text_only["error"]["message"]


@pytest.mark.parametrize("version", ["12.0", "10.4"])
def test_serve_refuses_websockets_older_than_13_with_a_clear_message(
    version: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import types

    from server import main

    old = types.ModuleType("websockets")
    old.__version__ = version  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "websockets", old)
    assert main.main(["--port", "0"]) == 1
    error = capsys.readouterr().err
    assert (
        error == f"error: the server needs websockets 13 or later, found {version}; "
        "install the server extra: from a clone of Deltalog, pip install -e '.[server]' "
        "(it installs websockets 13 or later)\n"
    )  # the package is not on PyPI: from a clone
    monkeypatch.undo()
    assert main.websockets_problem() is None  # the one installed here is new enough


def test_query_and_why_as_of_answer_a_past_epoch_or_name_the_oldest_readable_one() -> None:
    host = FakeHost()
    hub = Hub(Database(history=2), host)
    session = hub.open()
    _send(hub, session, type="define", id=0, text=GRAPH)
    _send(hub, session, type="transact", id=1, inserts={"edge": [[1, 2], [2, 3]]})
    _send(hub, session, type="transact", id=2, retracts={"edge": [[2, 3]]})
    _, then, now = host.take()
    past = then["epoch"]
    _send(hub, session, type="query", id=3, text="reach(1, y)", as_of=past)
    _send(hub, session, type="query", id=4, text="reach(1, y)")
    _send(hub, session, type="why", id=5, fact="reach(1, 3)", as_of=past)
    _send(hub, session, type="why", id=6, fact="reach(1, 3)")
    _send(hub, session, type="query", id=7, text="reach(1, y)", as_of=past - 1)
    _send(hub, session, type="query", id=8, text="reach(1, y)", as_of=now["epoch"] + 1)
    old, current, proof, absent, compacted, future = host.take()
    assert (old["rows"], old["epoch"]) == ([[2], [3]], past)
    assert (current["rows"], current["epoch"]) == ([[2]], now["epoch"])
    assert (proof["epoch"], proof["derivation"]["height"]) == (past, 2)
    assert absent["error"]["category"] == "not_found"
    error = compacted["error"]
    assert (error["category"], error["oldest_epoch"], error["current_epoch"]) == (
        "not_found", past, now["epoch"])  # fmt: skip
    assert f"the oldest readable epoch is {past}" in error["message"]
    assert future["error"]["category"] == "incorrect" and "not happened" in str(future)
    assert hub.db.epoch == now["epoch"]


def test_serve_takes_the_as_of_history_or_all() -> None:
    from server.main import parser

    assert parser().parse_args(["--as-of-epochs", "all"]).as_of_epochs is None
    assert parser().parse_args(["--as-of-epochs", "5"]).as_of_epochs == 5
    assert parser().parse_args([]).as_of_epochs == 1000
    with pytest.raises(SystemExit):
        parser().parse_args(["--as-of-epochs", "-3"])


def test_clients_query_and_subscribe_to_the_deltalog_relations() -> None:
    hub, host, session = _hub()
    _send(hub, session, type="subscribe", id=1, text="deltalog.relation(n, t)")
    _send(hub, session, type="transact", id=2, inserts={"edge": [[1, 2], [2, 3]]})
    snapshot, change, reply = host.take()
    assert sorted(snapshot["rows"]) == [["edge", 0], ["reach", 0]]
    assert (change["epoch"], change["rows"], change["diffs"]) == (
        reply["epoch"], [["edge", 0], ["edge", 2]], [-1, 1])  # fmt: skip
    _send(hub, session, type="subscribe", id=3, text="reach(1, y)")
    _send(hub, session, type="query", id=4, text="deltalog.dataflow(q, o, s)")
    rows = host.take()[-1]["rows"]
    assert [(q, s) for q, _, s in rows] == [("reach(1, y)", 1)]
    _send(hub, session, type="transact", id=5, inserts={"deltalog.relation": [["edge", 9]]})
    refused = host.take()[-1]
    assert refused["error"]["category"] == "incorrect" and "reserved" in str(refused)


def test_max_rows_refuses_a_reads_cross_product_before_building_it_but_not_a_write() -> None:
    """`--max-rows` is a row limit on reads (`db.budget(rows=...)`): a query whose
    join step would build more rows is refused, at once and finally (no worker tries
    it again); a commit whose live dataflows build as many is not refused."""
    hub, host, session = _hub(limits=HistoryLimits(answer_rows=50))
    _send(hub, session, type="transact", id=1, inserts={"edge": [[1, 2], [2, 3]]})
    _send(hub, session, type="subscribe", id=2, text="edge(a, b), edge(c, d)")
    many = [[i, i + 100] for i in range(30)]
    _send(hub, session, type="transact", id=3, inserts={"edge": many})  # a 32 x 32 join
    _send(hub, session, type="query", id=4, text="edge(a, b), edge(c, d)")
    replies = {m.get("id"): m for m in host.take()}
    assert replies[2]["type"] == "snapshot" and replies[3]["type"] == "transacted"
    assert replies[4]["type"] == "error" and "row" in replies[4]["error"]["message"]
