"""Soufflé components over the server: relations named `instance.relation` are
defined, queried, subscribed to and written like any other."""

from __future__ import annotations

import pytest

from server.client import Client, ServerError
from server.transport import DeltalogServer
from tests.server.helpers import View, run

pytestmark = pytest.mark.server

GRAPH = """\
.comp Graph<N> {
    .decl edge(x: N, y: N)
    .decl reach(x: N, y: N)
    reach(x, y) :- edge(x, y).
    reach(x, z) :- reach(x, y), edge(y, z).
}
"""


def test_instances_are_defined_subscribed_to_and_written_over_the_server() -> None:
    async def scenario(server: DeltalogServer) -> None:
        client = await Client.connect(server.url)
        await client.define(GRAPH)
        await client.define(".init roads = Graph<symbol>\n.init rails = Graph<number>")
        sub = await client.subscribe("rails.reach(1, y)")
        view = View()
        view.apply(await sub.next(1))
        await client.transact({"rails.edge": [(1, 2), (2, 3)], "roads.edge": [("a", "b")]})
        view.apply(await sub.next(1))
        assert view.answer == {(2,), (3,)}
        assert await client.query('roads.reach("a", y)') == [("b",)]
        with pytest.raises(ServerError) as caught:
            await client.define(".init roads = Graph<number>")
        assert (caught.value.category, caught.value.line, caught.value.column) == ("conflict", 1, 1)
        with pytest.raises(ServerError) as caught:
            await client.define(".init lanes = Grahp<number>")
        assert (caught.value.category, caught.value.line, caught.value.column) == (
            "not_found", 1, 15)  # fmt: skip
        await client.close()

    run(scenario)
