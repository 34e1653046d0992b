"""A tune's journal: `data_dir()/tunes/NAME.jsonl`, one JSON object per line, appended and flushed as things
happen, and the state replayed from it (`TuneState`), from which every result of the tune is computed.

Records: a `header` (what is tuned), then `startup` (a restart's seconds to ready; on a Slurm host also its
`job_id`, its `queue_wait_s` and `total_s`, the seconds to ready counted without the queue wait), `level` (a
finished level's tok/s, its `block`, its seconds), `crash` (a setting that crashed or never became ready, with
the reason and the level), `drop` (a setting the drop rule took out after a pass), `done` (a restart finished
its levels) and `verify` records. `--resume` replays it: a (candidate, repeat, level) already in it is never
measured again, a restart cut off mid-way runs only its missing levels.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from specdash.errors import UsageError
from specdash.paths import data_dir
from specdash.tune.plan import TunePlan


@dataclass
class TuneState:
    """Everything measured so far (rebuilt from the journal on resume)."""

    values: dict[str, dict[int, dict[int, dict[int, float]]]] = field(default_factory=dict)
    """candidate -> repeat -> level -> block -> tok/s."""
    crashes: dict[str, dict[str, Any]] = field(default_factory=dict)
    """candidate -> the crash record."""
    startups: list[float] = field(default_factory=list)
    """Seconds each restart of this tune took to become ready (on a Slurm host, without its queue wait)."""
    queue_waits: list[float] = field(default_factory=list)
    """Seconds each restart's job waited in the Slurm queue (Slurm hosts only)."""
    jobs: list[dict[str, Any]] = field(default_factory=list)
    """Each restart that was a Slurm job: candidate, repeat, job id, queue wait, startup, in order."""
    level_s: list[float] = field(default_factory=list)
    """Seconds each measured level took."""
    restarts: int = 0
    """Restarts this tune made (across resumes)."""
    verify: dict[str, Any] | None = None
    """The last verification record."""
    done: set[tuple[str, int]] = field(default_factory=set)
    """(candidate, repeat) restarts that finished their levels and blocks."""
    dropped: dict[str, int] = field(default_factory=dict)
    """candidate -> the pass (from 0) after which the drop rule took it out."""
    passes_begun: int = 0
    """Passes the tune has begun (a restart of pass `p` was made: `p + 1`)."""

    def restarts_saved(self, repeats: int) -> int:
        """Restarts the drop rule and crashes spared in the passes begun so far: a dropped (or crashed) setting
        is not restarted in a later pass. Passes a cancel or a failure kept from starting save nothing."""
        out = {**{name: int(r.get("repeat", 0)) for name, r in self.crashes.items()}, **self.dropped}
        return sum(max(0, min(self.passes_begun, repeats) - 1 - after) for after in out.values())

    def measured(self) -> dict[str, dict[int, list[float]]]:
        """candidate -> level -> values over repeats."""
        out: dict[str, dict[int, list[float]]] = {}
        for name, repeats in self.values.items():
            for levels in repeats.values():
                for c, blocks in levels.items():
                    out.setdefault(name, {}).setdefault(c, []).extend(blocks.values())
        return out

    def blocks(self, candidate: str, repeat: int, c: int) -> int:
        """Blocks measured at (candidate, repeat, level)."""
        return len(self.values.get(candidate, {}).get(repeat, {}).get(c, {}))

    def apply(self, record: dict[str, Any]) -> None:
        """Fold one journal record in."""
        kind = record.get("type")
        if kind == "level":
            levels = self.values.setdefault(record["candidate"], {}).setdefault(int(record["repeat"]), {})
            levels.setdefault(int(record["c"]), {})[int(record.get("block", 0))] = float(record["tok_s"])
            if record.get("seconds"):
                self.level_s.append(float(record["seconds"]))
        elif kind == "crash":
            self.crashes[record["candidate"]] = record
        elif kind == "startup":
            self.restarts += 1
            self.passes_begun = max(self.passes_begun, int(record.get("repeat", 0)) + 1)
            if record.get("seconds") is not None:
                self.startups.append(float(record["seconds"]))
            if record.get("job_id"):
                if record.get("queue_wait_s") is not None:
                    self.queue_waits.append(float(record["queue_wait_s"]))
                keys = ("candidate", "repeat", "job_id", "queue_wait_s", "seconds")
                self.jobs.append({k: record.get(k) for k in keys})
        elif kind == "verify":
            self.verify = record
        elif kind == "drop":
            self.dropped.setdefault(record["candidate"], int(record["after"]))
        elif kind == "done":
            self.done.add((record["candidate"], int(record["repeat"])))


class Journal:
    """The append-only JSONL journal of one tune."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file: TextIO | None = None

    @staticmethod
    def default_dir() -> Path:
        """`data_dir()/tunes`."""
        return data_dir() / "tunes"

    def read(self) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
        """The header and the records (a torn last line from a SIGKILL is ignored)."""
        if not self.path.exists():
            return None, []
        header: dict[str, Any] | None = None
        records: list[dict[str, Any]] = []
        for line in self.path.read_text(encoding="utf-8").splitlines():
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            if record.get("type") == "header":
                header = record
            else:
                records.append(record)
        return header, records

    def write(self, record: dict[str, Any]) -> None:
        """Append and flush one record."""
        if self._file is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file = self.path.open("a", encoding="utf-8")
        self._file.write(json.dumps(record, default=str) + "\n")
        self._file.flush()

    def close(self) -> None:
        """Close the file."""
        if self._file is not None:
            self._file.close()
            self._file = None


def open_journal(plan: TunePlan, path: Path, resume: bool) -> tuple[Journal, TuneState]:
    """The journal for `plan` and the state replayed from it.

    Raises:
        UsageError: a journal exists without `--resume`, or `--resume` finds one for another tune.
    """
    journal = Journal(path)
    header, records = journal.read()
    state = TuneState()
    if header is not None and not resume:
        raise UsageError(f"tune {plan.name!r} has a journal at {path}; add --resume to go on, or pick another --name")
    if resume and header is not None:
        want = plan.header()
        for key in ("base_mode", "baseline_mode", "space", "levels", "repeats", "host"):
            if header.get(key) != want[key]:
                raise UsageError(f"--resume: the journal {path} is for {key} = {header.get(key)!r}, not {want[key]!r}")
        for record in records:
            state.apply(record)
    if header is None:
        journal.write(plan.header())
    return journal, state
