"""The local SQLite store: bench runs, levels, every request sample, and server start-ups.

Lives at `specdash.paths.data_dir() / "specdash.db"`, in WAL mode. Every sample is committed as it
arrives, so killing specdash at any moment loses no request it had reported as completed: a WAL commit is
durable against a process crash as soon as `commit()` returns (`synchronous=NORMAL` only risks the last
transactions on an OS crash or power loss, which is an acceptable trade for ~100 commits/s).

| table | one row per | written by |
|---|---|---|
| `runs` | sweep of one mode (host, mode, engine, version, server args, prompts + hash) | `create_run` |
| `levels` | level of a run (stats, server view, headroom, warnings as JSON) | `finish_level` |
| `samples` | request (timings, counts, failure reason, per-chunk arrays) | `add_sample` |
| `startups` | server start (host, mode, per-phase durations, total, outcome) | the lifecycle, for ETAs |
"""

from __future__ import annotations

import json
import os
import sqlite3
from array import array
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from specdash.bench.samples import Failure, RequestSample
from specdash.errors import SpecdashError
from specdash.paths import data_dir
from specdash.redact import REDACTED as REDACTED  # re-exported: what a secret is stored as
from specdash.redact import redact as redact  # re-exported for the store's callers

SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY,
    created TEXT NOT NULL,
    host TEXT NOT NULL,
    mode TEXT NOT NULL,
    engine TEXT NOT NULL DEFAULT '',
    engine_version TEXT NOT NULL DEFAULT '',
    server_args TEXT NOT NULL DEFAULT '{}',
    prompt_set TEXT NOT NULL DEFAULT '',
    prompt_hash TEXT NOT NULL DEFAULT '',
    endpoint TEXT NOT NULL DEFAULT '',
    output_len INTEGER NOT NULL DEFAULT 0,
    base_url TEXT NOT NULL DEFAULT '',
    config TEXT NOT NULL DEFAULT '{}',
    status TEXT NOT NULL DEFAULT 'running',
    finished TEXT
);
CREATE TABLE IF NOT EXISTS levels (
    id INTEGER PRIMARY KEY,
    run_id INTEGER NOT NULL REFERENCES runs(id),
    concurrency INTEGER NOT NULL,
    status TEXT NOT NULL DEFAULT 'running',
    started TEXT NOT NULL,
    finished TEXT,
    abort_reason TEXT,
    result TEXT NOT NULL DEFAULT '{}'
);
CREATE TABLE IF NOT EXISTS samples (
    id INTEGER PRIMARY KEY,
    run_id INTEGER NOT NULL REFERENCES runs(id),
    level_id INTEGER NOT NULL REFERENCES levels(id),
    idx INTEGER NOT NULL,
    prompt_idx INTEGER NOT NULL,
    worker INTEGER NOT NULL,
    error TEXT,
    detail TEXT NOT NULL DEFAULT '',
    http_status INTEGER,
    scheduled_ns INTEGER NOT NULL,
    start_ns INTEGER NOT NULL,
    end_ns INTEGER NOT NULL,
    first_token_ns INTEGER,
    last_token_ns INTEGER,
    output_tokens INTEGER NOT NULL,
    requested_tokens INTEGER NOT NULL,
    estimated INTEGER NOT NULL,
    per_chunk_exact INTEGER NOT NULL,
    spec_accept_length REAL,
    chunk_offsets_us BLOB NOT NULL,
    chunk_tokens BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS samples_level ON samples(level_id);
CREATE TABLE IF NOT EXISTS startups (
    id INTEGER PRIMARY KEY,
    created TEXT NOT NULL,
    host TEXT NOT NULL,
    mode TEXT NOT NULL,
    engine TEXT NOT NULL DEFAULT '',
    phases TEXT NOT NULL DEFAULT '{}',
    total_s REAL,
    outcome TEXT NOT NULL
);
"""


def default_path() -> Path:
    """`data_dir()/specdash.db`."""
    return data_dir() / "specdash.db"


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _pack(values: tuple[int, ...]) -> bytes:
    return array("q", values).tobytes()


def _unpack(blob: bytes) -> tuple[int, ...]:
    a = array("q")
    a.frombytes(blob)
    return tuple(a)


@dataclass(frozen=True)
class RunMeta:
    """What identifies a run (one mode's sweep against one server)."""

    host: str
    """The host name (or the URL for a headless run against a port)."""
    mode: str
    """The mode name (e.g. `baseline`, `eagle3`)."""
    engine: str = ""
    """`sglang` or `vllm` (empty when unknown)."""
    engine_version: str = ""
    """Engine version (from `/server_info` or `/version`)."""
    server_args: Mapping[str, Any] | None = None
    """The server's arguments, stored as JSON."""
    prompt_set: str = ""
    """Prompt set name or path."""
    prompt_hash: str = ""
    """SHA-256 of the prompt set."""
    endpoint: str = ""
    """`generate`, `chat` or `completions`."""
    output_len: int = 0
    """Tokens requested per request."""
    base_url: str = ""
    """The URL the probe used."""
    config: Mapping[str, Any] | None = None
    """The sweep configuration, stored as JSON."""


@dataclass(frozen=True)
class RunRecord:
    """A stored run."""

    id: int
    """Row id (the RUN argument of `specdash compare` and `specdash export`)."""
    created: str
    """UTC ISO time."""
    meta: RunMeta
    """Identity of the run."""
    status: str
    """`running`, `done`, `failed` or `interrupted`."""


@dataclass(frozen=True)
class LevelRecord:
    """A stored level."""

    id: int
    """Row id."""
    run_id: int
    """The run."""
    concurrency: int
    """Nominal C."""
    status: str
    """`running`, `done` or `failed`."""
    abort_reason: str | None
    """Why it stopped early."""
    result: dict[str, Any]
    """The level's result (see `specdash.bench.sweep.LevelResult.to_json`)."""


@dataclass(frozen=True)
class StartupRecord:
    """A stored server start."""

    id: int
    """Row id."""
    created: str
    """UTC ISO time."""
    host: str
    """Host."""
    mode: str
    """Mode."""
    engine: str
    """Engine."""
    phases: dict[str, float]
    """Phase name -> seconds."""
    total_s: float | None
    """Launch to ready (or to failure)."""
    outcome: str
    """e.g. `ready`, `crashed`, `stopped`."""


class Store:
    """One SQLite connection to the store (use from one thread)."""

    def __init__(self, path: Path | str | None = None, *, create: bool = True) -> None:
        """Open (and create) the store.

        Args:
            path: The database file; default `data_dir()/specdash.db`. `":memory:"` for tests.
            create: False for readers (`export`, `compare`): a missing file is an error naming it, not a
                new empty store.

        Raises:
            SpecdashError: When the file is missing (with `create=False`), not a store, or unreadable;
                the message names the file. A new store is 0600 in a 0700 directory (it holds launch args).
        """
        self.path = Path(path) if path is not None and str(path) != ":memory:" else path
        if path is None:
            self.path = default_path()
        try:
            if isinstance(self.path, Path):
                if not create and not self.path.is_file():
                    raise SpecdashError(f"store {self.path}: no such file (give an existing store with --db)")
                if create and not self.path.parent.exists():
                    self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
                if create and not self.path.exists():
                    os.close(os.open(self.path, os.O_CREAT | os.O_WRONLY, 0o600))
            self._db = sqlite3.connect(str(self.path), isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute("PRAGMA busy_timeout=5000")
            self._db.executescript(SCHEMA)
        except (sqlite3.Error, OSError) as exc:
            raise SpecdashError(f"store {self.path}: {exc}") from None

    def close(self) -> None:
        """Close the connection."""
        self._db.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _insert(self, sql: str, params: tuple[Any, ...]) -> int:
        cur = self._db.execute(sql, params)
        rowid = cur.lastrowid
        assert rowid is not None
        return rowid

    # runs ------------------------------------------------------------------------------------------------

    def create_run(self, meta: RunMeta) -> int:
        """Record a new run; returns its id."""
        return self._insert(
            "INSERT INTO runs (created, host, mode, engine, engine_version, server_args, prompt_set, prompt_hash,"
            " endpoint, output_len, base_url, config) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                _now(),
                meta.host,
                meta.mode,
                meta.engine,
                meta.engine_version,
                json.dumps(redact(dict(meta.server_args or {})), default=str),
                meta.prompt_set,
                meta.prompt_hash,
                meta.endpoint,
                meta.output_len,
                meta.base_url,
                json.dumps(redact(dict(meta.config or {})), default=str),
            ),
        )

    def update_run(self, run_id: int, *, engine: str | None = None, engine_version: str | None = None) -> None:
        """Fill in what is learnt about the server after the run started."""
        if engine is not None:
            self._db.execute("UPDATE runs SET engine=? WHERE id=?", (engine, run_id))
        if engine_version is not None:
            self._db.execute("UPDATE runs SET engine_version=? WHERE id=?", (engine_version, run_id))

    def finish_run(self, run_id: int, status: str) -> None:
        """Mark a run `done`, `failed` or `interrupted`."""
        self._db.execute("UPDATE runs SET status=?, finished=? WHERE id=?", (status, _now(), run_id))

    def runs(self) -> list[RunRecord]:
        """All runs, newest first."""
        rows = self._db.execute("SELECT * FROM runs ORDER BY id DESC").fetchall()
        return [self._run(r) for r in rows]

    def run(self, run_id: int) -> RunRecord | None:
        """One run, or None."""
        row = self._db.execute("SELECT * FROM runs WHERE id=?", (run_id,)).fetchone()
        return None if row is None else self._run(row)

    def _run(self, r: tuple[Any, ...]) -> RunRecord:
        meta = RunMeta(
            host=r[2],
            mode=r[3],
            engine=r[4],
            engine_version=r[5],
            server_args=json.loads(r[6]),
            prompt_set=r[7],
            prompt_hash=r[8],
            endpoint=r[9],
            output_len=r[10],
            base_url=r[11],
            config=json.loads(r[12]),
        )
        return RunRecord(id=r[0], created=r[1], meta=meta, status=r[13])

    # levels ----------------------------------------------------------------------------------------------

    def start_level(self, run_id: int, concurrency: int) -> int:
        """Record a level as running; returns its id."""
        return self._insert(
            "INSERT INTO levels (run_id, concurrency, started) VALUES (?,?,?)", (run_id, concurrency, _now())
        )

    def finish_level(self, level_id: int, status: str, result: Mapping[str, Any], abort_reason: str | None) -> None:
        """Store a level's result."""
        self._db.execute(
            "UPDATE levels SET status=?, finished=?, result=?, abort_reason=? WHERE id=?",
            (status, _now(), json.dumps(dict(result), default=str), abort_reason, level_id),
        )

    def levels(self, run_id: int) -> list[LevelRecord]:
        """The levels of a run in the order they ran."""
        rows = self._db.execute(
            "SELECT id, run_id, concurrency, status, abort_reason, result FROM levels WHERE run_id=? ORDER BY id",
            (run_id,),
        ).fetchall()
        return [LevelRecord(r[0], r[1], r[2], r[3], r[4], json.loads(r[5])) for r in rows]

    # samples ---------------------------------------------------------------------------------------------

    def add_sample(self, run_id: int, level_id: int, s: RequestSample) -> None:
        """Write one request sample and commit it."""
        self._db.execute(
            "INSERT INTO samples (run_id, level_id, idx, prompt_idx, worker, error, detail, http_status, scheduled_ns,"
            " start_ns, end_ns, first_token_ns, last_token_ns, output_tokens, requested_tokens, estimated,"
            " per_chunk_exact, spec_accept_length, chunk_offsets_us, chunk_tokens)"
            " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                run_id,
                level_id,
                s.index,
                s.prompt_index,
                s.worker,
                None if s.error is None else s.error.value,
                s.detail,
                s.http_status,
                s.scheduled_ns,
                s.start_ns,
                s.end_ns,
                s.first_token_ns,
                s.last_token_ns,
                s.output_tokens,
                s.requested_tokens,
                int(s.estimated),
                int(s.per_chunk_exact),
                s.spec_accept_length,
                _pack(s.chunk_offsets_us),
                _pack(s.chunk_tokens),
            ),
        )

    def samples(self, run_id: int, level_id: int | None = None) -> list[RequestSample]:
        """The samples of a run (or of one level), in the order they were written."""
        return list(self.iter_samples(run_id, level_id))

    def iter_samples(self, run_id: int, level_id: int | None = None) -> Iterator[RequestSample]:
        """Like `samples`, one at a time."""
        for _, sample in self.iter_level_samples(run_id, level_id):
            yield sample

    def iter_level_samples(self, run_id: int, level_id: int | None = None) -> Iterator[tuple[int, RequestSample]]:
        """(level id, sample) pairs of a run, in the order they were written."""
        sql = (
            "SELECT idx, prompt_idx, worker, error, detail, http_status, scheduled_ns, start_ns, end_ns,"
            " first_token_ns, last_token_ns, output_tokens, requested_tokens, estimated, per_chunk_exact,"
            " spec_accept_length, chunk_offsets_us, chunk_tokens, level_id FROM samples WHERE run_id=?"
        )
        params: tuple[Any, ...] = (run_id,)
        if level_id is not None:
            sql += " AND level_id=?"
            params += (level_id,)
        for r in self._db.execute(sql + " ORDER BY id", params):
            yield (
                r[18],
                RequestSample(
                    index=r[0],
                    prompt_index=r[1],
                    worker=r[2],
                    error=None if r[3] is None else Failure(r[3]),
                    detail=r[4],
                    http_status=r[5],
                    scheduled_ns=r[6],
                    start_ns=r[7],
                    end_ns=r[8],
                    first_token_ns=r[9],
                    last_token_ns=r[10],
                    output_tokens=r[11],
                    requested_tokens=r[12],
                    estimated=bool(r[13]),
                    per_chunk_exact=bool(r[14]),
                    spec_accept_length=r[15],
                    chunk_offsets_us=_unpack(r[16]),
                    chunk_tokens=_unpack(r[17]),
                ),
            )

    # startups --------------------------------------------------------------------------------------------

    def add_startup(
        self,
        host: str,
        mode: str,
        phases: Mapping[str, float],
        total_s: float | None,
        outcome: str,
        engine: str = "",
    ) -> int:
        """Record one server start (per-phase seconds, total, outcome); returns its id."""
        return self._insert(
            "INSERT INTO startups (created, host, mode, engine, phases, total_s, outcome) VALUES (?,?,?,?,?,?,?)",
            (_now(), host, mode, engine, json.dumps(dict(phases)), total_s, outcome),
        )

    def startups(self, host: str | None = None, mode: str | None = None, limit: int = 20) -> list[StartupRecord]:
        """Recent starts, newest first, optionally for one host and/or mode (for start-up ETAs)."""
        sql = "SELECT id, created, host, mode, engine, phases, total_s, outcome FROM startups WHERE 1=1"
        params: list[Any] = []
        if host is not None:
            sql += " AND host=?"
            params.append(host)
        if mode is not None:
            sql += " AND mode=?"
            params.append(mode)
        sql += " ORDER BY id DESC LIMIT ?"
        params.append(limit)
        return [
            StartupRecord(r[0], r[1], r[2], r[3], r[4], json.loads(r[5]), r[6], r[7])
            for r in self._db.execute(sql, params)
        ]
