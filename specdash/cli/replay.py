"""`specdash replay LOGFILE`: run a saved server log through the startup tracker and print its timeline.

The same tracker and engine rules as a live startup, with the log's own timestamps as the clock, so a
user can check what specdash would have shown for a log they have (and we can test it on real logs).
The file is streamed (bounded memory whatever its size); the end of the file is the end of the evidence.

Exit codes: 0 ready / serving / stopped, 1 crashed, 3 incomplete, 2 usage error or not a server log.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from specdash.core.timeline import replay_file
from specdash.errors import UsageError
from specdash.safetext import escape_controls

EXIT_CODES = {"ready": 0, "serving": 0, "stopped": 0, "crashed": 1, "incomplete": 3}
"""The exit code for each outcome (2 is a usage error, or a file that is no server log)."""


def run(args: argparse.Namespace) -> int:
    """Replay the log; the exit code says the outcome (`EXIT_CODES`)."""

    path = Path(args.logfile)
    name = escape_controls(str(path))  # a file name is text from a file system: shown, never acted on
    if not path.exists():
        raise UsageError(f"log file not found: {name}")
    if not path.is_file():
        raise UsageError(f"not a file: {name}")
    try:
        with path.open("rb") as stream:
            timeline = replay_file(stream, args.engine)
    except OSError as exc:
        raise UsageError(f"cannot read {name}: {exc.strerror or exc}") from exc
    if timeline.evidence_lines == 0 and timeline.engine == "unknown":
        raise UsageError(f"{name}: not a server log (no line in it is one an inference server prints)")
    summary = timeline.as_dict()
    if args.json:
        print(json.dumps({"file": name, **summary}, indent=2, ensure_ascii=False))
    else:
        print(_render(path, summary))
    return EXIT_CODES[str(summary["outcome"])]


def _seconds(value: object) -> str:
    return f"{value:.1f} s" if isinstance(value, int | float) else "-"


def _render(path: Path, summary: dict[str, object]) -> str:
    versions = summary["versions"]
    version = f", version {'; '.join(map(str, versions))}" if isinstance(versions, list) and versions else ""
    out = [f"{escape_controls(path.name)}  (engine: {summary['engine']}{version})", ""]
    out.append(f"  {'phase':<24} {'start':>9} {'duration':>11}  progress")
    phases = summary["phases"]
    for span in phases if isinstance(phases, list) else []:
        duration = _seconds(span["duration"])
        if span["duration"] is None:
            duration = f">= {_seconds(span['at_least'])}" if span["at_least"] is not None else "-"
        progress = span["progress"]
        shown = f"{progress['done']}/{progress['total']} {progress['unit']}" if isinstance(progress, dict) else ""
        marker = "  <- crashed here" if span["state"] == "crashed" else ""
        out.append(f"  {span['phase']:<24} {'+' + _seconds(span['start']):>9} {duration:>11}  {shown}{marker}")
    if not phases:
        out.append("  (no startup phase lines in this log)")
    out.append("")
    outcome = summary["outcome"]
    line = f"result: {outcome} (highest phase: {summary['highest_phase']}, total {_seconds(summary['total'])})"
    if summary["reason"]:
        line += f"\nreason: {summary['reason']}"
    decided = summary["decided_by"]
    if isinstance(decided, dict):
        where = f"line {decided['line']}" if decided["line"] is not None else "end of log"
        line += f"\ndecided by {where}: {decided['text']}"
    out.append(line)
    suspects = summary["suspects"]
    for suspect in suspects if isinstance(suspects, list) else []:
        out.append(f"warning: {suspect}")
    return "\n".join(out)
