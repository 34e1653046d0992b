"""Drive a real `specdash sim` process from tests and benchmarks.

`SimProcess` starts `python -m specdash sim ...` in its own session (so the whole tree, TP children
included, can be killed as one process group), merges stdout and stderr like `2>&1`, splits the output on
`\\r` and `\\n` as a log tailer would, and lets callers wait for a line or for the exit with a deadline.
The streaming clients count tokens from the server's cumulative counts (`meta_info.completion_tokens`, or
`usage` on the OpenAI routes), never from chunks, and record `(arrival time, cumulative tokens)` per stream
so that rates can be taken over steady-state windows.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import json
import os
import re
import signal
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import TracebackType

import aiohttp

from specdash.core.lines import LineSplitter
from tests.support.eventually import eventually
from tests.support.ports import free_port

READY = "The server is fired up and ready to roll!"
"""SGLang's ready line, which the simulator prints once it serves."""


def group_members(groups: set[int]) -> list[int]:
    """Live (non-zombie) PIDs in any of these process groups, read from /proc."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if fields[0] != "Z" and int(fields[2]) in groups:
            pids.append(int(entry))
    return pids


class SimProcess:
    """A simulator child process with its merged, line-split output."""

    def __init__(self, args: Sequence[str], env: dict[str, str] | None = None) -> None:
        self.args = list(args)
        self.env = {**os.environ, "no_proxy": "127.0.0.1,localhost", "NO_PROXY": "127.0.0.1,localhost", **(env or {})}
        self.proc: asyncio.subprocess.Process | None = None
        self.lines: list[str] = []
        self._raw: list[str] = []
        self._changed = asyncio.Condition()
        self._reader: asyncio.Task[None] | None = None
        self._cursor = 0

    @property
    def port(self) -> int:
        """The `--port` it was started with (the last one, as argparse reads it)."""
        return int(self.args[len(self.args) - 1 - self.args[::-1].index("--port") + 1])

    @property
    def pid(self) -> int:
        """The simulator's main PID (also its process group id)."""
        assert self.proc is not None
        return self.proc.pid

    async def start(self) -> SimProcess:
        """Launch; returns self."""
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "specdash",
            "sim",
            *self.args,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
            env=self.env,
        )
        self._reader = asyncio.ensure_future(self._read())
        return self

    async def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        splitter = LineSplitter()
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")  # bars' blocks span reads
        while True:
            chunk = await self.proc.stdout.read(65536)
            text = decoder.decode(chunk, final=not chunk)
            self._raw.append(text)
            new = splitter.feed(text) if chunk else splitter.flush()
            async with self._changed:
                self.lines.extend(new)
                if not chunk:
                    self.lines.append("")  # EOF marker never matches a real pattern; see wait_for
                self._changed.notify_all()
            if not chunk:
                return

    @property
    def raw(self) -> str:
        """Everything the process printed so far, `\\r` and all."""
        return "".join(self._raw)

    @property
    def eof(self) -> bool:
        """True once the output pipe closed (the whole tree exited or closed it)."""
        return self._reader is not None and self._reader.done()

    async def wait_for(self, pattern: str | re.Pattern[str], timeout: float, from_start: bool = False) -> re.Match[str]:
        """Wait for a line matching `pattern` after the previous match (or from the start); return the match.

        Raises:
            TimeoutError: not seen within `timeout` seconds (or the output ended first).
        """
        regex = re.compile(pattern) if isinstance(pattern, str) else pattern
        pos = 0 if from_start else self._cursor
        deadline = time.monotonic() + timeout
        async with self._changed:
            while True:
                while pos < len(self.lines):
                    m = regex.search(self.lines[pos])
                    pos += 1
                    if m:
                        self._cursor = pos
                        return m
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self.eof:
                    tail = "\n".join(self.lines[-15:])
                    raise TimeoutError(f"no line matching {regex.pattern!r} within {timeout} s; last lines:\n{tail}")
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._changed.wait(), remaining)

    async def wait_exit(self, timeout: float) -> int:
        """The main process's exit status (negative: killed by that signal).

        Polls `returncode` rather than awaiting `Process.wait()`: asyncio's wait() also waits for the
        output pipe to close, which orphaned TP children keep open after the parent died.

        Raises:
            AssertionError: still running after `timeout` seconds.
        """
        proc = self.proc
        assert proc is not None
        code = await eventually(
            lambda: proc.returncode, until=lambda code: code is not None, timeout=timeout,
            what=f"simulator pid {self.pid} exits (its return code)",
        )  # fmt: skip
        assert code is not None
        return code

    async def wait_gone(self, timeout: float = 15.0) -> None:
        """Wait until nothing of the process group is left (orphaned TP children included).

        Raises:
            AssertionError: group members still alive after `timeout` seconds (named in the message).
        """
        await eventually(
            self.group_pids, until=lambda pids: not pids, timeout=timeout,
            what=f"simulator process group {self.pid} gone (live PIDs)",
        )  # fmt: skip

    def signal(self, signum: int) -> None:
        """Send a signal to the main process only."""
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signum)

    def group_pids(self) -> list[int]:
        """Live (non-zombie) PIDs in the simulator's process group, read from /proc."""
        return group_members({self.pid})

    def kill_group(self) -> None:
        """SIGKILL the whole process group (the simulator and every child, orphaned or not)."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGKILL)

    async def close(self) -> None:
        """Kill the group and reap the main process."""
        if self.proc is None:
            return
        self.kill_group()
        with contextlib.suppress(TimeoutError, ProcessLookupError):
            await asyncio.wait_for(self.proc.wait(), 10)  # the group is dead, so the pipe closes too
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader

    async def __aenter__(self) -> SimProcess:
        return await self.start()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()


class Simulators:
    """Starts simulators for one test and kills every one's process group at the end (orphans included).

    `await sims(*args, port=None, scale=0.002, env=None, ready=None)` starts `specdash sim` with `--port` (a
    free loopback port unless given) and `--sim-time-scale scale` before `args`; with `ready` (seconds) it
    returns only once the ready line is out. The process's port is `proc.port`.
    """

    def __init__(self) -> None:
        self.procs: list[SimProcess] = []

    async def __call__(
        self,
        *args: str,
        port: int | None = None,
        scale: float = 0.002,
        env: dict[str, str] | None = None,
        ready: float | None = None,
    ) -> SimProcess:
        proc = SimProcess(["--port", str(port or free_port()), "--sim-time-scale", str(scale), *args], env=env)
        self.procs.append(proc)
        await proc.start()
        if ready is not None:
            await proc.wait_for(READY, ready)
        return proc

    async def close(self) -> None:
        """Kill every simulator started (whatever state the test left it in)."""
        for proc in self.procs:
            await proc.close()


async def probe_health(port: int, timeout: float = 2.0) -> int | None:
    """GET /health once: the status, or None when the connection is refused."""
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout)) as session:
            async with session.get(f"http://127.0.0.1:{port}/health") as resp:
                await resp.read()
                return resp.status
    except aiohttp.ClientConnectorError:
        return None


@dataclass
class StreamRecord:
    """One streamed request: `(monotonic arrival, cumulative completion tokens)` per content event."""

    events: list[tuple[float, int]] = field(default_factory=list)
    final_tokens: int = 0
    """The server's final count (usage or the last cumulative count)."""
    meta: dict[str, object] = field(default_factory=dict)
    """The final `meta_info` (native route)."""
    started: float = 0.0


async def stream_generate(
    session: aiohttp.ClientSession,
    port: int,
    max_new_tokens: int,
    ignore_eos: bool = True,
    text: str = "Tell me about speculative decoding.",
) -> StreamRecord:
    """One native `/generate` stream at temperature 0; tokens from cumulative `meta_info.completion_tokens`."""
    rec = StreamRecord(started=time.monotonic())
    body = {
        "text": text,
        "sampling_params": {"max_new_tokens": max_new_tokens, "temperature": 0, "ignore_eos": ignore_eos},
        "stream": True,
    }
    async with session.post(f"http://127.0.0.1:{port}/generate", json=body) as resp:
        resp.raise_for_status()
        async for raw in resp.content:
            line = raw.strip()
            if not line.startswith(b"data:") or line == b"data: [DONE]":
                continue
            chunk = json.loads(line[5:])
            meta = chunk["meta_info"]
            rec.events.append((time.monotonic(), int(meta["completion_tokens"])))
            rec.final_tokens = int(meta["completion_tokens"])
            if meta.get("finish_reason") is not None:
                rec.meta = meta
    return rec


async def stream_completion(
    session: aiohttp.ClientSession, port: int, max_tokens: int, chat: bool = False
) -> StreamRecord:
    """One OpenAI stream with `include_usage`; the count comes from the final usage chunk.

    Events carry a running estimate (characters are not tokens), replaced by the usage count at the end;
    only use `final_tokens` from this client.
    """
    rec = StreamRecord(started=time.monotonic())
    route = "/v1/chat/completions" if chat else "/v1/completions"
    body: dict[str, object] = {
        "model": "default",
        "max_tokens": max_tokens,
        "ignore_eos": True,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if chat:
        body["messages"] = [{"role": "user", "content": "Tell me about speculative decoding."}]
    else:
        body["prompt"] = "Tell me about speculative decoding."
    async with session.post(f"http://127.0.0.1:{port}{route}", json=body) as resp:
        resp.raise_for_status()
        async for raw in resp.content:
            line = raw.strip()
            if not line.startswith(b"data:") or line == b"data: [DONE]":
                continue
            chunk = json.loads(line[5:])
            if chunk.get("usage"):
                rec.final_tokens = int(chunk["usage"]["completion_tokens"])
            elif chunk.get("choices"):
                rec.events.append((time.monotonic(), len(rec.events)))
    return rec


def steady_rate(records: Sequence[StreamRecord], w0: float, w1: float) -> float:
    """Aggregate tok/s over `[w0, w1]`: the sum of each stream's own rate between its first and last
    event inside the window. Measuring each stream between its own events (step boundaries) avoids the
    quantisation error of counting whole steps against a window edge. Streams with fewer than two
    events in the window, or spanning less than half of it, are left out (queued or finishing)."""
    total = 0.0
    for rec in records:
        inside = [(t, n) for t, n in rec.events if w0 <= t <= w1]
        if len(inside) < 2:
            continue
        (ta, na), (tb, nb) = inside[0], inside[-1]
        if tb - ta < 0.5 * (w1 - w0):
            continue
        total += (nb - na) / (tb - ta)
    return total
