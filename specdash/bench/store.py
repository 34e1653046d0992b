"""The local SQLite store: bench runs, levels, every request sample, and server start-ups.

Lives at `specdash.paths.data_dir() / "specdash.db"`, in WAL mode. Samples are written by one writer
thread, off the caller's event loop (the UI's, under the dashboard): `add_sample` queues the row and returns;
the thread writes whatever has arrived since its last commit in one transaction and commits it at once, so a
sample is durable milliseconds after it arrives, and killing specdash loses at most the batch being written.
A WAL commit is durable against a process crash as soon as it returns (`synchronous=NORMAL` only risks the
last transactions on an OS crash or power loss). Reads and level/run updates first wait for the queue
(`flush`), so they see every sample added before them.

The schema is versioned (`PRAGMA user_version`): `MIGRATIONS[i]` takes a database from version i to i + 1,
and opening a store applies the missing ones in order. Adding a column is one small function appended there.
Rows are read by column name.

| table | one row per | written by |
|---|---|---|
| `runs` | sweep of one mode (host, mode, engine, version, server args, prompts + hash, provenance) | `create_run` |
| `levels` | level of a run (stats, server view, headroom, warnings as JSON) | `finish_level` |
| `samples` | request (timings, counts, failure reason, per-chunk arrays) | `add_sample` |
| `startups` | server start (host, mode, per-phase durations, total, outcome, kind) | the session, for ETAs |

`startups.kind` says how specdash saw the server become ready: `startup` (watched from launch to ready:
the only kind the ETA learns from), `attach` (found running) or `adoption` (started by hand, adopted).
The column came with schema version 3 (`_v3`); older stores get it on open, their rows as startups.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import queue
import sqlite3
import threading
import weakref
from array import array
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from specdash.bench.samples import Failure, RequestSample
from specdash.errors import SpecdashError
from specdash.paths import data_dir
from specdash.redact import REDACTED as REDACTED  # re-exported: what a secret is stored as
from specdash.redact import redact as redact  # re-exported for the store's callers

SCHEMA_V1 = """
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


def _v1(db: sqlite3.Connection) -> None:
    """The first schema (also a no-op on stores created before versioning: every table already exists)."""
    for statement in SCHEMA_V1.split(";"):  # not executescript: it would commit the migration's transaction
        if statement.strip():
            db.execute(statement)


def _v2(db: sqlite3.Connection) -> None:
    """`runs.provenance`: command line, GPUs, versions, workload fingerprint (`specdash.bench.provenance`)."""
    if "provenance" not in {r[1] for r in db.execute("PRAGMA table_info(runs)")}:
        db.execute("ALTER TABLE runs ADD COLUMN provenance TEXT NOT NULL DEFAULT '{}'")


def _v3(db: sqlite3.Connection) -> None:
    """`startups.kind`: `startup` (watched from launch: the ETA learns from it), `attach` or `adoption`.
    Rows written before are startups (the default), as they were counted then."""
    if "kind" not in {row[1] for row in db.execute("PRAGMA table_info(startups)")}:
        db.execute("ALTER TABLE startups ADD COLUMN kind TEXT NOT NULL DEFAULT 'startup'")


def _v4(db: sqlite3.Connection) -> None:
    """`greedy_outputs`: the texts a mode produced at temperature 0 for a prompt set (the greedy spot check,
    `core.greedy`), so a later check on another mode compares against them without restarting this one."""
    db.execute(
        "CREATE TABLE IF NOT EXISTS greedy_outputs (id INTEGER PRIMARY KEY, created TEXT NOT NULL,"
        " host TEXT NOT NULL, mode TEXT NOT NULL, workload TEXT NOT NULL, outputs TEXT NOT NULL)"
    )
    db.execute("CREATE INDEX IF NOT EXISTS greedy_lookup ON greedy_outputs(host, mode, workload)")


MIGRATIONS: list[Callable[[sqlite3.Connection], None]] = [_v1, _v2, _v3, _v4]
"""`MIGRATIONS[i]` takes the database from schema version i to i + 1 (append; never edit a released one)."""
SCHEMA_VERSION = len(MIGRATIONS)
"""The version this code writes."""


def migrate(db: sqlite3.Connection) -> int:
    """Apply the migrations the database lacks, each in its own transaction; returns the version reached.

    Raises:
        SpecdashError: The database was written by a newer specdash (its version is above ours).
    """
    version = int(db.execute("PRAGMA user_version").fetchone()[0])
    if version > SCHEMA_VERSION:
        raise SpecdashError(f"the store's schema version {version} is newer than this specdash's ({SCHEMA_VERSION})")
    for target in range(version, SCHEMA_VERSION):
        db.execute("BEGIN IMMEDIATE")
        try:
            MIGRATIONS[target](db)
            db.execute(f"PRAGMA user_version = {target + 1}")
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
    return SCHEMA_VERSION


def default_path() -> Path:
    """`data_dir()/specdash.db`."""
    return data_dir() / "specdash.db"


def demo_path() -> Path:
    """`data_dir()/demo.db`: the demo's runs stay out of the user's own store."""
    return data_dir() / "demo.db"


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
    provenance: Mapping[str, Any] | None = None
    """Where the figures come from (`specdash.bench.provenance`): command line, GPUs, versions, workload."""


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
    kind: str = "startup"
    """`startup` (watched from launch: the ETA learns from it), `attach` or `adoption`."""


_SAMPLE_COLUMNS = (
    "run_id, level_id, idx, prompt_idx, worker, error, detail, http_status, scheduled_ns, start_ns, end_ns,"
    " first_token_ns, last_token_ns, output_tokens, requested_tokens, estimated, per_chunk_exact,"
    " spec_accept_length, chunk_offsets_us, chunk_tokens"
)
_INSERT_SAMPLE = f"INSERT INTO samples ({_SAMPLE_COLUMNS}) VALUES ({','.join('?' * 20)})"


def _sample_row(run_id: int, level_id: int, s: RequestSample) -> tuple[Any, ...]:
    return (
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
    )


def _flush_at_exit(ref: weakref.ref[_SampleWriter]) -> None:
    writer = ref()
    if writer is not None:
        with contextlib.suppress(SpecdashError):
            writer.flush()


class _SampleWriter:
    """One thread that writes queued sample rows, each batch in one transaction committed at once."""

    def __init__(self, db: sqlite3.Connection, lock: threading.Lock) -> None:
        self._db = db
        self._lock = lock
        self._queue: queue.Queue[tuple[Any, ...] | None] = queue.Queue()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="specdash-store-writer", daemon=True)
        self._thread.start()

    def put(self, row: tuple[Any, ...]) -> None:
        self._raise()
        self._queue.put(row)

    def flush(self) -> None:
        """Wait until every queued row is committed (or failed: then raise its error)."""
        self._queue.join()
        self._raise()

    def close(self) -> None:
        self._queue.put(None)
        self._thread.join()
        self._raise()

    def _raise(self) -> None:
        if self._error is not None:
            error, self._error = self._error, None
            raise SpecdashError(f"could not write a sample to the store: {error}") from error

    def _run(self) -> None:
        while True:
            rows = [self._queue.get()]
            while True:  # whatever else has arrived goes into the same transaction
                try:
                    rows.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            batch = [r for r in rows if r is not None]
            try:
                if batch:
                    with self._lock:
                        self._db.execute("BEGIN")
                        try:
                            self._db.executemany(_INSERT_SAMPLE, batch)
                            self._db.execute("COMMIT")
                        except BaseException:
                            self._db.execute("ROLLBACK")
                            raise
            except sqlite3.Error as exc:
                self._error = exc
            finally:
                for _ in rows:
                    self._queue.task_done()
            if len(batch) != len(rows):
                return


class Store:
    """One SQLite connection to the store, used from one thread (samples are written by the store's own thread)."""

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
            # One connection shared with the writer thread, every use under `_lock` (an in-memory store has no
            # second connection to the same data).
            self._db = sqlite3.connect(str(self.path), isolation_level=None, check_same_thread=False)
            self._db.row_factory = sqlite3.Row
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute("PRAGMA busy_timeout=5000")
            self.schema_version = migrate(self._db)
            """The schema version after migrations (`SCHEMA_VERSION`)."""
        except (sqlite3.Error, OSError) as exc:
            raise SpecdashError(f"store {self.path}: {exc}") from None
        self._lock = threading.Lock()
        self._writer = _SampleWriter(self._db, self._lock)
        # A store the caller never closed still writes its queue before the interpreter exits.
        atexit.register(_flush_at_exit, weakref.ref(self._writer))

    def close(self) -> None:
        """Write what is queued, then close the connection."""
        try:
            self._writer.close()
        finally:
            self._db.close()

    def flush(self) -> None:
        """Wait until every sample added so far is committed."""
        self._writer.flush()

    def _execute(self, sql: str, params: tuple[Any, ...] | list[Any] = ()) -> sqlite3.Cursor:
        self._writer.flush()
        with self._lock:
            try:
                return self._db.execute(sql, params)
            except sqlite3.OperationalError as exc:  # a full disk, a file size limit, an I/O error: name the store
                raise SpecdashError(
                    f"store {self.path}: {exc} (is the disk full?); what was written before is kept there"
                ) from exc

    def _iter_rows(self, sql: str, params: tuple[Any, ...], size: int = 1000) -> Iterator[sqlite3.Row]:
        """Rows in chunks (an export may read 100,000s of samples); the lock is not held between chunks."""
        self._writer.flush()
        with self._lock:
            cur = self._db.execute(sql, params)
        while True:
            with self._lock:
                rows = cur.fetchmany(size)
            if not rows:
                return
            yield from rows

    def _fetchall(self, sql: str, params: tuple[Any, ...] | list[Any] = ()) -> list[sqlite3.Row]:
        self._writer.flush()
        with self._lock:
            return self._db.execute(sql, params).fetchall()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _insert(self, sql: str, params: tuple[Any, ...]) -> int:
        cur = self._execute(sql, params)
        rowid = cur.lastrowid
        assert rowid is not None
        return rowid

    # runs ------------------------------------------------------------------------------------------------

    def create_run(self, meta: RunMeta) -> int:
        """Record a new run; returns its id."""
        return self._insert(
            "INSERT INTO runs (created, host, mode, engine, engine_version, server_args, prompt_set, prompt_hash,"
            " endpoint, output_len, base_url, config, provenance) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
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
                json.dumps(redact(dict(meta.provenance or {})), default=str),
            ),
        )

    def finish_run(self, run_id: int, status: str) -> None:
        """Mark a run `done`, `failed` or `interrupted`."""
        self._execute("UPDATE runs SET status=?, finished=? WHERE id=?", (status, _now(), run_id))

    def runs(self) -> list[RunRecord]:
        """All runs, newest first."""
        rows = self._fetchall("SELECT * FROM runs ORDER BY id DESC")
        return [self._run(r) for r in rows]

    def run(self, run_id: int) -> RunRecord | None:
        """One run, or None."""
        rows = self._fetchall("SELECT * FROM runs WHERE id=?", (run_id,))
        return self._run(rows[0]) if rows else None

    def _run(self, r: sqlite3.Row) -> RunRecord:
        meta = RunMeta(
            host=r["host"],
            mode=r["mode"],
            engine=r["engine"],
            engine_version=r["engine_version"],
            server_args=json.loads(r["server_args"]),
            prompt_set=r["prompt_set"],
            prompt_hash=r["prompt_hash"],
            endpoint=r["endpoint"],
            output_len=r["output_len"],
            base_url=r["base_url"],
            config=json.loads(r["config"]),
            provenance=json.loads(r["provenance"]),
        )
        return RunRecord(id=r["id"], created=r["created"], meta=meta, status=r["status"])

    # levels ----------------------------------------------------------------------------------------------

    def start_level(self, run_id: int, concurrency: int) -> int:
        """Record a level as running; returns its id."""
        return self._insert(
            "INSERT INTO levels (run_id, concurrency, started) VALUES (?,?,?)", (run_id, concurrency, _now())
        )

    def finish_level(self, level_id: int, status: str, result: Mapping[str, Any], abort_reason: str | None) -> None:
        """Store a level's result."""
        self._execute(
            "UPDATE levels SET status=?, finished=?, result=?, abort_reason=? WHERE id=?",
            (status, _now(), json.dumps(dict(result), default=str), abort_reason, level_id),
        )

    def note_crash(self, run_id: int, concurrency: int, reason: str) -> None:
        """The server crashed during level `concurrency` of the run: that level is `failed` with `reason` (the
        newest attempt, or a new row when it crashed before the level began) and the run is `failed`."""
        rows = self._fetchall(
            "SELECT id FROM levels WHERE run_id=? AND concurrency=? ORDER BY id DESC LIMIT 1", (run_id, concurrency)
        )
        if rows:
            self._execute(
                "UPDATE levels SET status='failed', abort_reason=?, finished=COALESCE(finished, ?) WHERE id=?",
                (reason, _now(), rows[0]["id"]),
            )
        else:
            level_id = self.start_level(run_id, concurrency)
            self.finish_level(level_id, "failed", {}, reason)
        self.finish_run(run_id, "failed")

    def levels(self, run_id: int) -> list[LevelRecord]:
        """The levels of a run in the order they ran."""
        rows = self._fetchall("SELECT * FROM levels WHERE run_id=? ORDER BY id", (run_id,))
        return [
            LevelRecord(
                id=r["id"],
                run_id=r["run_id"],
                concurrency=r["concurrency"],
                status=r["status"],
                abort_reason=r["abort_reason"],
                result=json.loads(r["result"]),
            )
            for r in rows
        ]

    # samples ---------------------------------------------------------------------------------------------

    def add_sample(self, run_id: int, level_id: int, s: RequestSample) -> None:
        """Queue one request sample for the writer thread, which commits it at once (see the module doc)."""
        self._writer.put(_sample_row(run_id, level_id, s))

    def samples(self, run_id: int, level_id: int | None = None) -> list[RequestSample]:
        """The samples of a run (or of one level), in the order they were written."""
        return list(self.iter_samples(run_id, level_id))

    def iter_samples(self, run_id: int, level_id: int | None = None) -> Iterator[RequestSample]:
        """Like `samples`, one at a time."""
        for _, sample in self.iter_level_samples(run_id, level_id):
            yield sample

    def iter_level_samples(self, run_id: int, level_id: int | None = None) -> Iterator[tuple[int, RequestSample]]:
        """(level id, sample) pairs of a run, in the order they were written."""
        sql = "SELECT * FROM samples WHERE run_id=?"
        params: tuple[Any, ...] = (run_id,)
        if level_id is not None:
            sql += " AND level_id=?"
            params += (level_id,)
        for r in self._iter_rows(sql + " ORDER BY id", params):
            yield (
                r["level_id"],
                RequestSample(
                    index=r["idx"],
                    prompt_index=r["prompt_idx"],
                    worker=r["worker"],
                    error=None if r["error"] is None else Failure(r["error"]),
                    detail=r["detail"],
                    http_status=r["http_status"],
                    scheduled_ns=r["scheduled_ns"],
                    start_ns=r["start_ns"],
                    end_ns=r["end_ns"],
                    first_token_ns=r["first_token_ns"],
                    last_token_ns=r["last_token_ns"],
                    output_tokens=r["output_tokens"],
                    requested_tokens=r["requested_tokens"],
                    estimated=bool(r["estimated"]),
                    per_chunk_exact=bool(r["per_chunk_exact"]),
                    spec_accept_length=r["spec_accept_length"],
                    chunk_offsets_us=_unpack(r["chunk_offsets_us"]),
                    chunk_tokens=_unpack(r["chunk_tokens"]),
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
        kind: str = "startup",
    ) -> int:
        """Record one server start (per-phase seconds, total, outcome) or an attach / adoption (`kind`)."""
        return self._insert(
            "INSERT INTO startups (created, host, mode, engine, phases, total_s, outcome, kind)"
            " VALUES (?,?,?,?,?,?,?,?)",
            (_now(), host, mode, engine, json.dumps(dict(phases)), total_s, outcome, kind),
        )

    def startups(
        self, host: str | None = None, mode: str | None = None, limit: int = 20, kind: str | None = None
    ) -> list[StartupRecord]:
        """Recent starts, newest first, optionally for one host, mode and/or kind (`startup` for ETAs)."""
        sql = "SELECT * FROM startups WHERE 1=1"
        params: list[Any] = []
        if kind is not None:
            sql += " AND kind=?"
            params.append(kind)
        if host is not None:
            sql += " AND host=?"
            params.append(host)
        if mode is not None:
            sql += " AND mode=?"
            params.append(mode)
        sql += " ORDER BY id DESC LIMIT ?"
        params.append(limit)
        return [
            StartupRecord(
                id=r["id"],
                created=r["created"],
                host=r["host"],
                mode=r["mode"],
                engine=r["engine"],
                phases=json.loads(r["phases"]),
                total_s=r["total_s"],
                outcome=r["outcome"],
                kind=r["kind"],
            )
            for r in self._fetchall(sql, params)
        ]

    # greedy outputs -------------------------------------------------------------------------------------

    def add_greedy_outputs(self, host: str, mode: str, workload: str, outputs: Sequence[str]) -> int:
        """Record the temperature-0 outputs of `mode` on `host` for the prompts `workload` names (a fingerprint
        of the prompt texts, endpoint and output length: `bench.greedy.workload_key`)."""
        return self._insert(
            "INSERT INTO greedy_outputs (created, host, mode, workload, outputs) VALUES (?,?,?,?,?)",
            (_now(), host, mode, workload, json.dumps(list(outputs))),
        )

    def greedy_outputs(self, host: str, mode: str, workload: str) -> tuple[str, list[str]] | None:
        """The newest stored outputs of `mode` on `host` for `workload`, with when they were stored; None if
        there are none."""
        rows = self._fetchall(
            "SELECT created, outputs FROM greedy_outputs WHERE host=? AND mode=? AND workload=?"
            " ORDER BY id DESC LIMIT 1",
            (host, mode, workload),
        )
        if not rows:
            return None
        return str(rows[0]["created"]), [str(text) for text in json.loads(rows[0]["outputs"])]
