"""`specdash bench` on a terminal and in a pipe (issue 27 point 10), against the real simulator.

On a terminal (a real pty) each level is one line updated in place, and the final table fits `$COLUMNS` (80
and 100) with units under the column names; piped, every progress report is a plain line and the table
has every column, for scripts.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import pty
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.sim_harness import Simulators

ESCAPES = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
LEVELS = ("1", "2", "4")


def _argv(port: int, db: Path) -> list[str]:
    return [sys.executable, "-m", "specdash", "bench", "--url", f"http://127.0.0.1:{port}", "--mode", "m",
            "--levels", ",".join(LEVELS), "--duration", "2.5", "--output-len", "16", "--db", str(db)]  # fmt: skip


def _env(tmp_path: Path, columns: int | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    env.update({"XDG_DATA_HOME": str(tmp_path / "data"), "XDG_STATE_HOME": str(tmp_path / "state")})
    env["no_proxy"] = "127.0.0.1,localhost"
    if columns is not None:
        env["COLUMNS"] = str(columns)
    return env


async def _on_a_pty(argv: list[str], env: dict[str, str], timeout: float) -> tuple[int, str]:
    """Run `argv` with stdout and stderr on a new pty; everything it wrote, and its exit code."""
    master, slave = pty.openpty()
    proc = await asyncio.create_subprocess_exec(
        *argv, stdin=subprocess.DEVNULL, stdout=slave, stderr=slave, env=env, start_new_session=True
    )
    os.close(slave)
    os.set_blocking(master, False)
    out = bytearray()
    ended = asyncio.get_running_loop().create_future()

    def readable() -> None:  # the loop calls this when the pty has bytes, or has closed (EIO, or b"")
        try:
            chunk = os.read(master, 65536)
        except BlockingIOError:
            return
        except OSError:  # EIO: every writer of the pty is gone
            chunk = b""
        if chunk:
            out.extend(chunk)
        elif not ended.done():
            ended.set_result(None)

    loop = asyncio.get_running_loop()
    loop.add_reader(master, readable)
    try:
        await asyncio.wait_for(ended, timeout)
    except TimeoutError:
        raise AssertionError(f"bench on a pty ran past {timeout} s: {bytes(out[-2000:])!r}") from None
    finally:
        loop.remove_reader(master)
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, 9)
        os.close(master)
    code = await asyncio.wait_for(proc.wait(), 30)
    return code, out.decode(errors="replace").replace("\r\n", "\n")


@pytest.mark.parametrize("columns", [80, 100])
async def test_on_a_terminal_one_line_per_level_and_a_table_that_fits(
    columns: int, sim: Simulators, tmp_path: Path
) -> None:
    proc = await sim("--model-path", "/models/m", "--sim-speed", "4", ready=60)
    code, text = await _on_a_pty(_argv(proc.port, tmp_path / "runs.db"), _env(tmp_path, columns), timeout=240)
    assert code == 0, text[-3000:]
    lines = text.split("\n")
    # Progress overwrote itself with carriage returns: what stays on screen is one line per level.
    assert "\r" in text
    kept = [ESCAPES.sub("", line.split("\r")[-1]) for line in lines]
    done = [line for line in kept if re.match(r"\[m C=\d+\] done:", line)]
    assert [re.search(r"C=(\d+)", d).group(1) for d in done] == list(LEVELS), kept  # type: ignore[union-attr]
    before_table = kept[: kept.index(next(x for x in kept if x.startswith("run ")))]
    assert len([x for x in before_table if x.strip()]) <= len(LEVELS) + 2, before_table  # + warnings, if any
    # Every line the user sees fits the terminal, the updating ones included.
    visible = [ESCAPES.sub("", piece) for line in lines for piece in line.split("\r")]
    assert max(len(v) for v in visible) <= columns, max(visible, key=len)
    table = kept[kept.index(next(x for x in kept if x.startswith("run "))) + 1 :]
    assert "ms p50" in table[1] and "out" in table[1], table[:3]  # units under the names
    assert any("--json has every column" in x for x in table) or columns >= 120


async def test_piped_every_report_is_a_plain_line_and_the_table_is_whole(sim: Simulators, tmp_path: Path) -> None:
    proc = await sim("--model-path", "/models/m", "--sim-speed", "4", ready=60)
    done = await asyncio.to_thread(
        subprocess.run,
        _argv(proc.port, tmp_path / "runs.db"),
        capture_output=True,
        text=True,
        env=_env(tmp_path, None),
        timeout=240,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "\r" not in done.stdout and "\x1b[" not in done.stdout
    progress = [x for x in done.stdout.splitlines() if re.match(r"\[m C=\d+\] (t=|warming)", x)]
    assert len(progress) >= len(LEVELS)  # at least one report per level, each on its own line
    assert "ITL/chunk" in done.stdout and "achieved" in done.stdout and "not shown" not in done.stdout
