"""A tiny headless Chromium driver for tests: the Chrome DevTools Protocol over `websockets`.

Not part of the package. It starts `chromium --headless=new` with its own profile
directory and `--remote-debugging-port=0`, reads the port Chromium chose from the
profile's `DevToolsActivePort` file, attaches to a fresh page target, and sends
CDP commands (`Runtime.evaluate`, `Page.navigate`, `Page.captureScreenshot`).
The browser process is always killed and its profile removed on exit.

    async with Browser.launch(binary) as page:
        await page.goto("http://127.0.0.1:8000/")
        await page.wait_for("document.readyState === 'complete'")
        title = await page.evaluate("document.title")
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from websockets.asyncio.client import ClientConnection, connect

NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")


def find_chromium() -> str | None:
    """A Chromium binary: `$CHROMIUM`, or the first of the usual names on the PATH."""
    chosen = os.environ.get("CHROMIUM")
    if chosen:
        return shutil.which(chosen)
    return next((found for name in NAMES if (found := shutil.which(name))), None)


class BrowserError(Exception):
    """Chromium did not start, a command failed, or a wait timed out."""


class Page:
    """One page target, driven through its CDP session on the browser's socket."""

    def __init__(self, ws: ClientConnection, session: str, timeout: float) -> None:
        self.ws, self.session, self.timeout = ws, session, timeout
        self.ids = itertools.count(1)

    async def send(self, method: str, **params: Any) -> dict[str, Any]:
        """A CDP command's result; events that arrive meanwhile are skipped."""
        number = next(self.ids)
        message = {"id": number, "method": method, "params": params}
        if self.session:  # else a command to the browser itself
            message["sessionId"] = self.session
        await self.ws.send(json.dumps(message))
        async with asyncio.timeout(self.timeout):
            while True:
                answer = json.loads(await self.ws.recv())
                if answer.get("id") != number:
                    continue
                if "error" in answer:
                    raise BrowserError(f"{method}: {answer['error']}")
                return dict(answer["result"])

    async def goto(self, url: str) -> None:
        await self.send("Page.navigate", url=url)

    async def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression (awaited if it is a promise)."""
        result = await self.send(
            "Runtime.evaluate", expression=expression, awaitPromise=True, returnByValue=True
        )
        if "exceptionDetails" in result:
            details = result["exceptionDetails"]
            raise BrowserError(f"{expression!r} threw {details.get('exception', details)}")
        return result["result"].get("value")

    async def wait_for(self, expression: str, timeout: float = 10.0) -> Any:
        """Poll `expression` until it is truthy; its value. `BrowserError` on timeout."""
        deadline = time.monotonic() + timeout
        while True:
            with contextlib.suppress(BrowserError):  # e.g. the page is still loading
                value = await self.evaluate(expression)
                if value:
                    return value
            if time.monotonic() > deadline:
                raise BrowserError(f"timed out after {timeout} s waiting for {expression}")
            await asyncio.sleep(0.05)

    async def screenshot(self, path: Path) -> None:
        data = await self.send("Page.captureScreenshot", format="png")
        path.write_bytes(base64.b64decode(data["data"]))


class Browser:
    """A headless Chromium process and its profile directory."""

    @classmethod
    @contextlib.asynccontextmanager
    async def launch(
        cls, binary: str, width: int = 1200, height: int = 760, timeout: float = 20.0
    ) -> AsyncIterator[Page]:
        profile = Path(tempfile.mkdtemp(prefix="deltalog-chromium-"))
        log = (profile / "chromium.log").open("wb")
        process = subprocess.Popen(
            [binary, "--headless=new", "--remote-debugging-port=0",
             f"--user-data-dir={profile}", "--no-sandbox", "--disable-gpu",
             "--disable-dev-shm-usage", "--no-first-run", "--no-default-browser-check",
             "--disable-extensions", "--hide-scrollbars", f"--window-size={width},{height}",
             "about:blank"],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            url = await _devtools_url(profile, process, timeout)
            async with connect(url, max_size=64 * 1024 * 1024, open_timeout=timeout) as ws:
                page = Page(ws, "", timeout)
                target = await page.send("Target.createTarget", url="about:blank")
                attached = await page.send(
                    "Target.attachToTarget", targetId=target["targetId"], flatten=True
                )
                page.session = attached["sessionId"]
                await page.send("Page.enable")
                yield page
        except BaseException as error:
            log.flush()
            tail = (profile / "chromium.log").read_text(errors="replace")[-2000:]
            if isinstance(error, BrowserError | OSError | TimeoutError):
                raise BrowserError(f"{error}\n--- chromium's output ---\n{tail}") from error
            raise
        finally:
            process.kill()
            process.wait(timeout=10)
            log.close()
            shutil.rmtree(profile, ignore_errors=True)


async def _devtools_url(profile: Path, process: subprocess.Popen[bytes], timeout: float) -> str:
    """The browser's DevTools WebSocket URL, from the port file Chromium writes."""
    port_file = profile / "DevToolsActivePort"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise BrowserError(f"chromium exited with status {process.returncode}")
        lines = port_file.read_text().split() if port_file.exists() else []
        if len(lines) >= 2:
            return f"ws://127.0.0.1:{lines[0]}{lines[1]}"
        await asyncio.sleep(0.05)
    raise BrowserError(f"chromium wrote no DevToolsActivePort within {timeout} s")
