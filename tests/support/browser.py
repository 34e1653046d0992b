"""Headless Chromium (Debian's `chromium`) driven over the DevTools protocol with aiohttp's WebSocket client.

`load_page(path)` opens a file, waits for the load event and returns the console errors, exceptions, every
network request that is not the page itself, and a full-page PNG screenshot. No browser download: it uses
the system binary (`make system-deps` installs it).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import json
import os
import shutil
import signal
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from tests.support.eventually import eventually, eventually_sync

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--remote-debugging-port=0", "--remote-allow-origins=*",
)  # fmt: skip


@dataclass
class PageLoad:
    """What a page did while it loaded."""

    errors: list[str] = field(default_factory=list)
    """Console errors, uncaught exceptions and error log entries."""
    requests: list[str] = field(default_factory=list)
    """URLs requested other than the page's own file."""
    screenshot: bytes = b""
    """PNG of the whole page."""


def _port(profile: Path, proc: subprocess.Popen[bytes], timeout: float) -> int:
    """The DevTools port Chromium writes into its profile (`--remote-debugging-port=0` picks a free one)."""
    marker = profile / "DevToolsActivePort"

    def written() -> str:
        if proc.poll() is not None:
            raise RuntimeError(f"chromium exited with {proc.returncode}")
        return marker.read_text().strip() if marker.exists() else ""

    return int(eventually_sync(written, timeout=timeout, what=f"chromium's DevTools port in {marker}").split()[0])


def load_page(path: Path, width: int = 1280, timeout: float = 60.0) -> PageLoad:
    """Open `path` in a fresh headless Chromium profile and record the load (see the module docstring)."""
    assert CHROMIUM is not None
    result = PageLoad()
    with tempfile.TemporaryDirectory(prefix="specdash-chromium-") as profile:
        proc = subprocess.Popen(
            [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", "about:blank"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            port = _port(Path(profile), proc, timeout)
            asyncio.run(_session(port, path.resolve().as_uri(), width, result, timeout))
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    return result


async def _session(port: int, page_url: str, width: int, result: PageLoad, timeout: float) -> None:
    async with aiohttp.ClientSession() as http:

        async def targets() -> list[dict[str, Any]]:
            async with http.get(f"http://127.0.0.1:{port}/json/list") as resp:
                return [t for t in await resp.json() if t.get("type") == "page"]

        pages = await eventually(targets, timeout=timeout, what="a page among chromium's DevTools targets")
        async with http.ws_connect(pages[0]["webSocketDebuggerUrl"], max_msg_size=0) as ws:
            await _drive(ws, page_url, width, result, timeout)


async def _drive(
    ws: aiohttp.ClientWebSocketResponse, page_url: str, width: int, result: PageLoad, timeout: float
) -> None:
    ids = itertools.count(1)
    replies: dict[int, asyncio.Future[dict[str, Any]]] = {}
    loaded = asyncio.Event()

    async def reader() -> None:
        async for msg in ws:
            data = json.loads(msg.data)
            if "id" in data and data["id"] in replies:
                replies.pop(data["id"]).set_result(data)
                continue
            method, params = data.get("method"), data.get("params", {})
            if method == "Page.loadEventFired":
                loaded.set()
            elif method == "Network.requestWillBeSent":
                url = params["request"]["url"]
                if url != page_url:
                    result.requests.append(url)
            elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                result.errors.append(" ".join(str(a.get("value", a.get("description"))) for a in params["args"]))
            elif method == "Runtime.exceptionThrown":
                result.errors.append(params["exceptionDetails"].get("text", "exception"))
            elif method == "Log.entryAdded" and params["entry"].get("level") == "error":
                result.errors.append(params["entry"].get("text", ""))

    async def call(method: str, **params: Any) -> dict[str, Any]:
        i = next(ids)
        replies[i] = asyncio.get_running_loop().create_future()
        await ws.send_str(json.dumps({"id": i, "method": method, "params": params}))
        reply = await replies[i]
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        return dict(reply.get("result", {}))

    task = asyncio.create_task(reader())
    try:
        async with asyncio.timeout(timeout):
            for domain in ("Page", "Runtime", "Log", "Network"):
                await call(f"{domain}.enable")
            await call("Emulation.setDeviceMetricsOverride", width=width, height=900, deviceScaleFactor=1, mobile=False)
            await call("Page.navigate", url=page_url)
            await loaded.wait()
            # Let late console output or requests (none expected) arrive before the screenshot.
            await call("Runtime.evaluate", expression="new Promise(r => requestAnimationFrame(() => r(1)))",
                       awaitPromise=True)  # fmt: skip
            shot = await call("Page.captureScreenshot", format="png", captureBeyondViewport=True)
            result.screenshot = base64.b64decode(shot["data"])
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
