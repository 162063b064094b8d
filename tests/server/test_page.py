"""The live page: served over plain HTTP on the WebSocket port, driven in headless Chromium.

The browser tests skip only when no Chromium binary is found; `.ci/run` installs
Debian's `chromium` when it is missing, so in CI they run.
Set DELTALOG_PAGE_SCREENSHOT=FILE.png to keep the screenshot (docs/live-page.png).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import tomllib
import urllib.error
import urllib.request
from fnmatch import fnmatch
from pathlib import Path

import pytest

from server.client import Client
from server.transport import DeltalogServer
from tests.browser import Browser, BrowserError, Page, find_chromium
from tests.server.helpers import GRAPH, run

pytestmark = pytest.mark.server


@pytest.fixture
def chromium() -> str:
    """The Chromium binary; without one the test skips, unless the run requires it
    (.ci/run sets DELTALOG_REQUIRE_BROWSER=1 where it could install Chromium)."""
    found = find_chromium()
    if found is None:
        reason = "no Chromium binary found (.ci/run installs the system's chromium)"
        if os.environ.get("DELTALOG_REQUIRE_BROWSER") == "1":
            pytest.fail(f"{reason}, but DELTALOG_REQUIRE_BROWSER=1")
        pytest.skip(reason)
    return found


# The page's table, as the person sees it: rows on their way out are struck through.
HEADER = "[...document.querySelectorAll('#answer thead th')].map(th => th.textContent)"
LIVE_ROWS = (
    "[...document.querySelectorAll('#answer tbody tr:not(.removed)')]"
    ".map(tr => [...tr.cells].map(td => td.textContent))"
)
ROW_CLASSES = (
    "Object.fromEntries([...document.querySelectorAll('#answer tbody tr')]"
    ".map(tr => [tr.cells[0].textContent, tr.className]))"
)
OPEN = "document.querySelector('#status')?.dataset.state === 'open'"
# Every class a row of the table is given, as (first cell, class), in order: the
# highlights are brief, so they are recorded rather than caught in the act.
RECORD_CLASSES = """
window.classes = [];
new MutationObserver((changes) => {
  for (const change of changes) {
    const rows = change.type === "childList" ? [...change.addedNodes] : [change.target];
    for (const tr of rows.filter((node) => node.tagName === "TR")) {
      classes.push([tr.cells[0].textContent, tr.className]);
    }
  }
}).observe(document.querySelector("#answer tbody"),
           {childList: true, subtree: true, attributes: true, attributeFilter: ["class"]});
true
"""


def _get(url: str) -> tuple[int, dict[str, str], str]:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback only
    try:
        with opener.open(url, timeout=10) as response:
            return response.status, dict(response.headers), response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read().decode()


def test_a_plain_get_of_the_root_answers_the_page_and_websockets_still_connect() -> None:
    async def scenario(server: DeltalogServer) -> None:
        status, headers, body = await asyncio.to_thread(_get, server.page_url)
        assert status == 200 and headers["Content-Type"] == "text/html; charset=utf-8"
        assert "connect-src 'self'" in headers["Content-Security-Policy"]
        assert body.startswith("<!doctype html>") and '"subscribe"' in body
        assert "http://" not in body.split("<script>")[1]  # no CDN, nothing fetched
        assert (await asyncio.to_thread(_get, server.page_url + "index.html"))[0] == 200
        status, _, body = await asyncio.to_thread(_get, server.page_url + "favicon.ico")
        assert status == 404 and "the page is at /" in body
        async with Client.connect(server.url) as client:
            await client.define(GRAPH)
            assert await client.query("edge(x, y)") == []

    run(scenario)


async def _type(page: Page, selector: str, text: str) -> None:
    await page.evaluate(
        f"document.querySelector({json.dumps(selector)}).value = {json.dumps(text)}"
    )


async def _click(page: Page, selector: str) -> None:
    await page.evaluate(f"document.querySelector({json.dumps(selector)}).click()")


async def _rows_become(page: Page, rows: list[list[str]]) -> None:
    """Wait until the table shows `rows` (in this order); on a timeout, say what it shows."""
    wanted = json.dumps(json.dumps(rows, separators=(",", ":")))
    try:
        await page.wait_for(f"JSON.stringify({LIVE_ROWS}) === {wanted}")
    except BrowserError as error:
        raise AssertionError(f"the page shows {await page.evaluate(LIVE_ROWS)}") from error


@pytest.mark.browser
def test_the_page_subscribes_shows_commits_as_they_happen_and_sends_transactions(
    chromium: str, tmp_path: Path
) -> None:
    async def scenario(server: DeltalogServer) -> None:
        async with Client.connect(server.url) as client:
            await client.define(GRAPH)
            await client.transact(inserts={"edge": [(1, 2), (2, 3)]})
            async with Browser.launch(chromium) as page:
                await page.goto(server.page_url)
                await page.wait_for(OPEN)
                await _type(page, "#query", "reach(1, y)")
                await _click(page, "#subscribe")
                assert await page.wait_for(f"{HEADER}.length && {HEADER}") == ["y"]
                await _rows_become(page, [["2"], ["3"]])

                # A commit by another client: 5 comes in highlighted, 3 goes out struck through,
                # and after a moment 5 is an ordinary row and 3 is gone.
                await page.evaluate(RECORD_CLASSES)
                await client.transact(inserts={"edge": [(1, 5)]}, retracts={"edge": [(2, 3)]})
                await _rows_become(page, [["2"], ["5"]])
                await page.screenshot(tmp_path / "page.png")
                await page.wait_for(f"{ROW_CLASSES}['5'] === 'settled'", timeout=10)
                await page.wait_for(f"!('3' in {ROW_CLASSES})", timeout=10)
                recorded = await page.evaluate("classes")
                assert ["5", "added"] in recorded and ["3", "removed"] in recorded
                assert recorded.index(["5", "added"]) < recorded.index(["5", "settled"])

                # The page sends a transaction; the Python client sees its epoch.
                await _type(page, "#relation", "edge")
                await _type(page, "#rows", "2, 3\n3, 4")
                await _click(page, "#insert")
                await _rows_become(page, [["2"], ["5"], ["3"], ["4"]])
                assert await client.query("reach(1, y)") == [(2,), (3,), (4,), (5,)]

                # A bad query is reported with its position; the old subscription goes on.
                await _type(page, "#query", "reach(1, y), edg(y, z)")
                await _click(page, "#subscribe")
                error = await page.wait_for("document.querySelector('#error').textContent")
                assert error.startswith("not_found: unknown relation `edg`; did you mean `edge`?")
                assert "(line 1, column 14)" in error
                await client.transact(retracts={"edge": [(1, 5)]})
                await _rows_become(page, [["2"], ["3"], ["4"]])

    run(scenario, timeout=120)
    png = (tmp_path / "page.png").read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 10_000
    keep = os.environ.get("DELTALOG_PAGE_SCREENSHOT")
    if keep:
        shutil.copyfile(tmp_path / "page.png", keep)


@pytest.mark.browser
def test_the_page_authenticates_with_the_token_of_its_url_and_says_when_it_is_wrong(
    chromium: str,
) -> None:
    async def scenario(server: DeltalogServer) -> None:
        async with Client.connect(server.url, token="s3cret") as client:
            await client.define(GRAPH)
            await client.transact(inserts={"edge": [(1, 2)]})
            async with Browser.launch(chromium) as page:
                await page.goto(server.page_url + "#token=s3cret&q=reach(x,%20y)")
                await _rows_become(page, [["1", "2"]])
                await page.goto("about:blank")
                await page.goto(server.page_url + "#token=wrong")
                await page.wait_for("document.querySelector('#status').dataset.state === 'closed'")
                error = await page.wait_for("document.querySelector('#error').textContent")
                assert "closed the connection" in error and "token" in error

    run(scenario, timeout=120, token="s3cret")


def test_the_package_data_carries_every_file_of_the_page() -> None:
    root = Path(__file__).resolve().parents[2]
    config = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    patterns = config["tool"]["setuptools"]["package-data"]["server"]
    files = [p.relative_to(root / "server").as_posix() for p in (root / "server/static").iterdir()]
    assert files and all(any(fnmatch(f, pattern) for pattern in patterns) for f in files)
