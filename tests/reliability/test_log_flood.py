"""A log flood through the real watcher (SSH stream, byte-offset follower, tracker): 10,000 lines/s, lines of
megabytes without a break, invalid UTF-8, ANSI and control junk, progress-bar carriage returns."""

from __future__ import annotations

import asyncio
import shutil
import time
import tracemalloc
from pathlib import Path

from specdash.core.events import LogBatch, SessionEvent
from specdash.remote.ssh import SSHHost, SSHOptions
from specdash.server.lifecycle import RunRecord
from specdash.server.watch import ServerWatch
from tests.integration.conftest import target
from tests.integration.remote_sim import remote_python
from tests.reliability.conftest import timing
from tests.sshd import TEST_HOME, Sshd, make_dir

SECONDS = 3
RATE = 10_000
HUGE = 16 * 1024 * 1024
"""Bytes of each line without a break (three of them: 48 MB that no buffer may hold at once)."""

FLOOD = f"""
import os, sys, time
out = open(sys.argv[1], "ab", buffering=0)
junk = [
    b"[2026-11-29 10:00:00 TP0] Decode batch. #running-req: 12, #token: 4096, gen throughput (token/s): 812.5",
    b"\\x1b[31mERROR\\x1b[0m \\x1b[2K\\x1b[1G colour and cursor junk \\x07\\x08\\x00 nul",
    b"invalid utf-8: \\xff\\xfe\\xc3\\x28 \\xed\\xa0\\x80 \\xf0\\x28\\x8c\\x28",
    b"Loading safetensors checkpoint shards:  50% Completed | 32/64 [00:10<00:10,  3.2it/s]\\r",
    b"Traceback (most recent call last): not really, just a flood line with a long tail " + b"=" * 2000,
]
per_tick = {RATE} // 100
n = 0
began = time.monotonic()
for tick in range({SECONDS} * 100):
    block = b"".join(junk[(n + i) % len(junk)] + b" #%d\\n" % (n + i) for i in range(per_tick))
    n += per_tick
    out.write(block)
    if tick % 100 == 50:
        out.write(b"x" * {HUGE} + b"\\n")  # one enormous line per second
    delay = began + (tick + 1) / 100 - time.monotonic()
    if delay > 0:
        time.sleep(delay)
out.write(b"FLOOD END\\n")
"""


def test_flood_script_compiles() -> None:
    compile(FLOOD, "flood", "exec")


async def test_log_flood_keeps_memory_bounded_and_the_tracker_never_raises(
    sshd: Sshd, ssh_options: SSHOptions, tmp_path: Path
) -> None:
    """Nothing lost and nothing held: every byte of the log is consumed (the follower's offset ends at the
    file size, the last line arrives), the tracker counts no internal error, and our peak memory stays far
    below the flood's size (the follower cuts lines without a break into bounded pieces, batches are
    flushed), while viewers get batches at about 4 per second, not one event per line."""
    scripts = make_dir("specdash-flood-")
    (scripts / "flood.py").write_text(FLOOD)
    (scripts / "flood.py").chmod(0o644)
    log = TEST_HOME / f"flood-{tmp_path.name}-{time.monotonic_ns()}.log"
    lines = 0
    chars = 0
    batches = 0
    last = ""

    def emit(event: SessionEvent) -> None:
        nonlocal lines, chars, batches, last
        if isinstance(event, LogBatch) and event.lines:
            batches += 1
            lines += len(event.lines)
            chars += sum(len(line) for line in event.lines)
            last = event.lines[-1]

    try:
        async with SSHHost(target(sshd), ssh_options) as host:
            started = await host.run(
                f": > {log}; setsid {remote_python()} {scripts / 'flood.py'} {log} > /dev/null 2>&1 < /dev/null & "
                "echo $! $(date +%s.%N)"
            )
            pid_text, started_at = started.stdout.split()
            pid = int(pid_text)
            record = RunRecord("flood", "flood", "sglang", 9, pid, pid, float(started_at), str(log))
            tracemalloc.start()
            began = time.monotonic()
            watch = ServerWatch(host, record, emit, state_dir=f"~/.specdash-tests/{tmp_path.name}-flood")
            async with asyncio.timeout(60):
                await watch.run()
            took = time.monotonic() - began
            _, peak = tracemalloc.get_traced_memory()
            tracemalloc.stop()
            size = int((await host.run(f"stat -c %s {log}")).stdout)
    finally:
        if tracemalloc.is_tracing():
            tracemalloc.stop()
        log.unlink(missing_ok=True)
        shutil.rmtree(scripts, ignore_errors=True)
    assert last == "FLOOD END"
    assert watch.follower.offset == size
    assert watch.tracker.internal_errors == 0
    assert lines >= SECONDS * RATE
    # Unbounded buffering would hold the 48 MB of huge lines; a batch may still carry one 16 MB line in pieces.
    assert peak < 32 * 1024 * 1024 and size > 48 * 1024 * 1024, (peak, size)
    assert batches < took * 4 * 3, (batches, took)  # batched by time, not per line
    timing(
        f"log flood: {size / 1e6:.1f} MB, {lines} lines in {took:.1f} s through the watcher; "
        f"peak traced memory {peak / 1e6:.1f} MB; {batches} batches; tracker internal errors 0"
    )
