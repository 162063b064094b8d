"""The `why_not`, `subscribe_why` and `what_if` requests (docs/protocol.md, docs/adr/0045,
0047), through the hub without a network, and through a real server."""

from __future__ import annotations

import json
from typing import Any

import pytest

from datalog import Database
from server.feeds import HistoryLimits
from server.protocol import ProtocolError, parse_request
from server.session import Hub, Session
from tests.server.helpers import GRAPH, FakeHost, run

pytestmark = pytest.mark.server


def _hub(**options: Any) -> tuple[Hub, FakeHost, Session]:
    host = FakeHost()
    hub = Hub(Database(), host, **options)
    session = hub.open()
    hub.handle(session, json.dumps({"type": "define", "id": 0, "text": GRAPH}))
    hub.handle(session, json.dumps({"type": "transact", "id": 0, "inserts": {"edge": [[1, 2]]}}))
    host.take()
    return hub, host, session


def _send(hub: Hub, session: Session, **request: Any) -> None:
    hub.handle(session, json.dumps(request))


@pytest.mark.parametrize(
    ("frame", "fragment"),
    [
        ('{"type": "why_not"}', "`fact`"),
        ('{"type": "why_not", "fact": "e(1)", "as_of": "2"}', "`as_of`"),
        ('{"type": "why_not", "fact": "e(1)", "depth": 11}', "`depth`"),
        ('{"type": "why_not", "fact": "e(1)", "depth": -1}', "`depth`"),
        ('{"type": "subscribe_why", "fact": 5}', "`fact`"),
        ('{"type": "subscribe_why", "fact": "e(1)", "granularity": {"epochs": 0}}', "granularity"),
        ('{"type": "what_if", "inserts": [[1, 2]]}', "`inserts`"),
        ('{"type": "what_if", "queries": "reach(x, y)"}', "`queries`"),
    ],
)
def test_bad_explanation_requests_are_incorrect(frame: str, fragment: str) -> None:
    with pytest.raises(ProtocolError) as caught:
        parse_request(frame)
    assert caught.value.category == "incorrect" and fragment in caught.value.message


def test_why_not_replies_with_the_tree_as_json_and_text() -> None:
    hub, host, session = _hub()
    _send(hub, session, type="why_not", id=1, fact="reach(1, 3)")
    _send(hub, session, type="why_not", id=2, fact="reach(1, 2)")
    _send(hub, session, type="why_not", id=3, fact="reach(1, y)")
    _send(hub, session, type="why_not", id=4, fact="reach(2, 1)", depth=0)
    absent, holds, open_fact, shallow = host.take()
    assert (absent["type"], absent["id"], absent["epoch"]) == ("absence", 1, hub.db.epoch)
    assert absent["text"] == str(hub.db.why_not("reach(1, 3)"))
    tree = absent["absence"]
    assert (tree["kind"], tree["fact"], tree["values"]) == ("absent", "reach(1, 3)", [1, 3])
    assert [p["text"] for p in tree["rules"][1]["premises"]] == ["reach(1, 2)", "edge(2, 3)"]
    assert holds["error"]["category"] == "conflict" and "`why`" in holds["error"]["message"]
    assert (open_fact["error"]["category"], open_fact["error"]["column"]) == ("incorrect", 10)
    nested = shallow["absence"]["rules"][1]["premises"][-1]["because"]
    assert nested["note"] == "not explained further: depth 0"


def test_subscribe_why_sends_each_change_before_the_commits_reply() -> None:
    hub, host, session = _hub()
    _send(hub, session, type="subscribe_why", id=1, fact="reach(1, 3)")
    (snapshot,) = host.take()
    assert (snapshot["type"], snapshot["id"], snapshot["holds"]) == ("why_snapshot", 1, False)
    assert snapshot["explanation"]["kind"] == "absent" and snapshot["epoch"] == hub.db.epoch
    number = snapshot["subscription"]
    _send(hub, session, type="transact", id=2, inserts={"edge": [[2, 3]]})
    _send(hub, session, type="transact", id=3, inserts={"edge": [[5, 6]]})  # no change
    change, done, quiet = host.take()
    assert (change["type"], change["subscription"], change["holds"]) == ("why_change", number, True)
    assert change["epoch"] == done["epoch"] and change["explanation"]["height"] == 2
    assert change["text"] == str(hub.db.why("reach(1, 3)"))
    assert quiet["type"] == "transacted"
    _send(hub, session, type="unsubscribe", id=4, subscription=number)
    _send(hub, session, type="transact", id=5, retracts={"edge": [[2, 3]]})
    assert [m["type"] for m in host.take()] == ["unsubscribed", "transacted"]
    assert not hub.db.queries.watches


def test_subscribe_why_paced_by_seconds_runs_on_the_hosts_clock() -> None:
    hub, host, session = _hub()
    _send(hub, session, type="subscribe_why", id=1, fact="reach(1, 3)",
          granularity={"seconds": 5})  # fmt: skip
    _send(hub, session, type="transact", id=2, inserts={"edge": [[2, 3]]})
    assert [m["type"] for m in host.take()] == ["why_snapshot", "transacted"]
    host.fire()  # the host's timer, on its (engine) thread
    (change,) = host.take()
    assert change["type"] == "why_change" and change["holds"]


def test_closing_the_connection_ends_its_explanation_subscriptions() -> None:
    hub, _, session = _hub()
    _send(hub, session, type="subscribe_why", id=1, fact="reach(1, 3)")
    hub.close(session)
    assert not hub.db.queries.watches


def test_an_explanation_past_the_budget_is_an_error_and_leaves_no_subscription() -> None:
    hub, host, session = _hub()
    hub.limits = HistoryLimits(seconds=0.0)
    _send(hub, session, type="subscribe_why", id=1, fact="reach(1, 3)")
    _send(hub, session, type="why_not", id=2, fact="reach(1, 3)")
    for message in host.take():
        assert message["type"] == "error" and "budget" in message["error"]["message"]
    assert not hub.db.queries.watches and not session.whys


def test_what_if_answers_the_changes_and_commits_nothing() -> None:
    hub, host, session = _hub()
    _send(hub, session, type="subscribe", id=1, text="reach(1, y)")
    epoch = hub.db.epoch
    _send(
        hub, session, type="what_if", id=2, inserts={"edge": [[2, 3]]}, retracts={"edge": [[1, 2]]}
    )
    _send(hub, session, type="what_if", id=3, inserts={"edge": [[2, 4]]}, queries=["edge(2, y)"])
    _send(hub, session, type="what_if", id=4, inserts={"nope": [[1]]})
    snapshot, both, asked, bad = host.take()
    assert snapshot["type"] == "snapshot"
    assert (both["type"], both["epoch"], hub.db.epoch) == ("what_if", epoch + 1, epoch)
    assert both["changes"] == {"reach(1, y)": {"columns": ["y"], "rows": [[2]], "diffs": [-1]}}
    assert asked["changes"] == {"edge(2, y)": {"columns": ["y"], "rows": [[4]], "diffs": [1]}}
    assert bad["error"]["category"] == "not_found"
    assert hub.db.query("edge(x, y)") == [(1, 2)]


def test_what_if_is_bound_by_max_rows() -> None:
    hub, host, session = _hub()
    hub.limits = HistoryLimits(answer_rows=1)
    rows = [[i, i + 1] for i in range(2, 40)]
    _send(hub, session, type="what_if", id=1, inserts={"edge": rows}, queries=["reach(x, y)"])
    (refused,) = host.take()
    assert refused["type"] == "error" and "row" in refused["error"]["message"]
    assert hub.db.query("edge(x, y)") == [(1, 2)]


def test_why_not_through_a_real_server() -> None:
    async def scenario(server: Any) -> None:
        from server.client import Client

        client = await Client.connect(server.url)
        await client.define(GRAPH)
        await client.transact(inserts={"edge": [(1, 2)]})
        reply = await client.request("why_not", fact="reach(1, 3)")
        assert reply["type"] == "absence" and reply["absence"]["relation"] == "reach"
        await client.close()

    run(scenario)


def test_explanations_are_bound_by_max_rows() -> None:
    hub, host, session = _hub()
    _send(hub, session, type="transact", id=1, inserts={"edge": [[1, i] for i in range(3, 40)]})
    host.take()
    hub.limits = HistoryLimits(answer_rows=5)
    _send(hub, session, type="why_not", id=2, fact="reach(2, 1)")  # reads edge(2, _): none
    _send(hub, session, type="why_not", id=3, fact="reach(1, 1)")  # reads reach(1, _): 38
    _send(hub, session, type="subscribe_why", id=4, fact="reach(1, 1)")
    small, large, watched = host.take()
    assert small["type"] == "absence"
    for refused in (large, watched):
        assert refused["type"] == "error" and "limit of 5 rows" in refused["error"]["message"]
    assert not hub.db.queries.watches and not session.whys
