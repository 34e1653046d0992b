"""Time and peak memory of specdash at the bounds of issue 29 (hostile inputs), through the real CLI.

Each case runs `python -m specdash ...` in a fresh process (peak RSS from `wait4`), on files this script makes
under a temporary directory: replays of BEL and NUL floods and of ordinary text, a 1,000-deep `extends` chain,
and in-process the escaping and the `status` replay of a NUL-filled 4 MB tail.

    python benchmarks/hostile_inputs.py [--src DIR]   # --src: an older checkout's root, to compare

Figures go to benchmarks/RESULTS.md with the date, the machine and its load.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _cli(argv: list[str], src: str | None, cwd: Path) -> tuple[float, float, int]:
    env = dict(os.environ)
    if src:
        env["PYTHONPATH"] = src
    began = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-m", "specdash", *argv],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
        cwd=cwd,  # not the source tree: `python -m` puts the working directory first on sys.path
    )
    _, status, usage = os.wait4(proc.pid, 0)
    return time.monotonic() - began, usage.ru_maxrss / 1024, os.waitstatus_to_exitcode(status)


def _chain(depth: int) -> str:
    head = '[modes.m0]\nengine = "sglang"\nmodel = "m"\n'
    return head + "".join(f'[modes.m{i}]\nextends = "m{i - 1}"\n' for i in range(1, depth))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--src", help="run this checkout's specdash instead (PYTHONPATH)")
    parser.add_argument("--only", help="run only the cases whose name holds this text")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        (d / "bel5").write_bytes(b"\x07" * 5_000_000)
        (d / "nul10").write_bytes(b"\x00" * 10_000_000)
        with (d / "nul300").open("wb") as f:
            f.truncate(300 * 1024 * 1024)
        (d / "text10").write_text("[2026-03-22 13:53:37] INFO an ordinary server line with some words\n" * 150_000)
        (d / "chain.toml").write_text(_chain(1000))
        cases = [
            ("replay 5 MB of BEL", ["replay", str(d / "bel5")]),
            ("replay 10 MB of NUL", ["replay", str(d / "nul10")]),
            ("replay 300 MB of NUL (sparse)", ["replay", str(d / "nul300")]),
            ("replay 10 MB of text (reference)", ["replay", str(d / "text10")]),
            ("config check, 1,000-deep extends", ["config", "check", "--config", str(d / "chain.toml")]),
            ("startup only (replay of one line)", ["replay", str(d / "chain.toml")]),
        ]
        print(f"| case | exit | wall s | peak RSS MiB |  ({'src ' + args.src if args.src else 'this checkout'})")
        print("|---|--:|--:|--:|")
        for name, argv in cases:
            if args.only and args.only not in name:
                continue
            wall, rss, code = _cli(argv, args.src, d)
            print(f"| {name} | {code} | {wall:.2f} | {rss:.0f} |", flush=True)
    if args.src:
        return
    from specdash.core.timeline import replay_text
    from specdash.safetext import escape_controls

    for name, text in (
        ("escape_controls, 5 MB of BEL", "\x07" * 5_000_000),
        ("escape_controls, 5 MB of 'ab' + BEL + ESC", "ab\x07\x1b" * 1_250_000),
        ("escape_controls, 5 MB of bidi + C1", "\u202e\x9b" * 2_500_000),
    ):
        began = time.perf_counter()
        escape_controls(text)
        print(f"| {name} (in process) | - | {time.perf_counter() - began:.3f} | - |")
    began = time.perf_counter()
    replay_text("\x00" * 4_000_000, "sglang")
    print(f"| status's replay of a 4 MB NUL tail (in process) | - | {time.perf_counter() - began:.3f} | - |")


if __name__ == "__main__":
    main()
