"""The SQLite store: round trips, start-ups, WAL, and no completed sample lost when specdash is SIGKILLed."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

from specdash.bench.samples import Failure, RequestSample
from specdash.bench.store import RunMeta, Store, default_path

WRITER = r"""
import sys
from specdash.bench.samples import RequestSample
from specdash.bench.store import RunMeta, Store

store = Store(sys.argv[1])
run = store.create_run(RunMeta(host="h", mode="m"))
level = store.start_level(run, 4)
print(f"run {run} {level}", flush=True)
for i in range(200_000):
    s = RequestSample(index=i, prompt_index=i % 7, worker=0, error=None, detail="", http_status=200,
                      scheduled_ns=i, start_ns=i, end_ns=i + 10, first_token_ns=i + 1, last_token_ns=i + 9,
                      output_tokens=8, requested_tokens=8, estimated=False, per_chunk_exact=True,
                      chunk_offsets_us=(1, 2, 3), chunk_tokens=(2, 3, 3))
    store.add_sample(run, level, s)
    store.flush()
    print(i, flush=True)  # reported as completed only after the writer thread's commit returned
"""


def sample(i: int, error: Failure | None = None) -> RequestSample:
    return RequestSample(
        index=i, prompt_index=i, worker=1, error=error, detail="x" if error else "", http_status=200,
        scheduled_ns=10, start_ns=20, end_ns=1_000_020, first_token_ns=100_020, last_token_ns=900_020,
        output_tokens=9, requested_tokens=16, estimated=False, per_chunk_exact=False,
        chunk_offsets_us=(100, 500, 900), chunk_tokens=(1, 4, 4), spec_accept_length=2.5,
    )  # fmt: skip


def test_killed_writer_loses_no_reported_sample(tmp_path: Path) -> None:
    db = tmp_path / "kill.db"
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(db)], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        assert proc.stdout is not None
        header = proc.stdout.readline().split()
        run_id, level_id = int(header[1]), int(header[2])
        reported = [int(proc.stdout.readline()) for _ in range(300)]
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
        # Lines already in the pipe were reported before the kill, so they count too.
        reported += [int(line) for line in proc.stdout.read().split()]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
    assert proc.returncode == -signal.SIGKILL
    with Store(db) as store:
        stored = {s.index for s in store.samples(run_id, level_id)}
    assert len(reported) >= 300
    assert set(reported) <= stored
    assert len(stored) - len(reported) <= 1  # at most the one committed but not yet printed


def test_samples_round_trip_exactly(tmp_path: Path) -> None:
    with Store(tmp_path / "r.db") as store:
        run = store.create_run(RunMeta(host="gpu1", mode="eagle3", engine="sglang", server_args={"tp": 8}))
        level = store.start_level(run, 8)
        originals = [sample(0), sample(1, Failure.STALL)]
        for s in originals:
            store.add_sample(run, level, s)
        assert store.samples(run) == originals
        assert store.samples(run, level) == originals
        store.finish_level(level, "done", {"stats": {"output_tok_s": 12.5}}, None)
        store.finish_run(run, "done")
        lv = store.levels(run)[0]
        assert (lv.concurrency, lv.status, lv.result["stats"]["output_tok_s"]) == (8, "done", 12.5)
        rec = store.run(run)
        assert rec is not None and rec.status == "done" and rec.meta.server_args == {"tp": 8}
        assert [r.id for r in store.runs()] == [run]
        assert store.run(run + 1) is None
    mode = sqlite3.connect(tmp_path / "r.db").execute("PRAGMA journal_mode").fetchone()[0]
    assert mode == "wal"


def test_startups_for_eta(tmp_path: Path) -> None:
    with Store(tmp_path / "st.db") as store:
        a = store.add_startup("gpu1", "base", {"loading weights": 40.0, "capturing CUDA graphs": 20.5}, 65.0, "ready")
        store.add_startup("gpu1", "eagle3", {"loading weights": 41.0}, None, "crashed", engine="sglang")
        store.add_startup("gpu2", "base", {}, 30.0, "ready")
        recs = store.startups(host="gpu1")
        assert [r.mode for r in recs] == ["eagle3", "base"]
        base = store.startups(host="gpu1", mode="base")[0]
        assert base.id == a and base.phases["capturing CUDA graphs"] == 20.5 and base.total_s == 65.0
        assert len(store.startups(limit=2)) == 2


def test_default_store_lives_in_the_data_dir(tmp_path: Path) -> None:
    # conftest points XDG_DATA_HOME into tmp_path, so this never touches the developer's store.
    path = default_path()
    assert str(path).startswith(str(tmp_path)) and path.name == "specdash.db"
    with Store() as store:
        store.create_run(RunMeta(host="h", mode="m"))
    assert path.exists()


def test_schema_is_versioned_and_migrations_apply_in_order(tmp_path: Path, monkeypatch) -> None:
    import pytest

    from specdash.bench import store as store_mod
    from specdash.errors import SpecdashError

    db = tmp_path / "v.db"
    # A store written before versioning: the tables exist, user_version is 0.
    raw = sqlite3.connect(db)
    raw.executescript(store_mod.SCHEMA_V1)
    raw.execute("INSERT INTO runs (created, host, mode) VALUES ('t', 'old-host', 'm')")
    raw.execute("INSERT INTO startups (created, host, mode, outcome) VALUES ('t', 'old-host', 'm', 'ready')")
    raw.commit()
    raw.close()
    current = store_mod.SCHEMA_VERSION
    with Store(db) as store:
        assert store.schema_version == current == 4
        assert [r.meta.host for r in store.runs()] == ["old-host"]
        # v3 added startups.kind: what was stored before counts as a startup, as it did then.
        assert [r.kind for r in store.startups()] == ["startup"]
        # v4 added greedy_outputs: the newest outputs per host, mode and workload.
        assert store.greedy_outputs("old-host", "m", "w") is None
        store.add_greedy_outputs("old-host", "m", "w", ["a", "b"])
        store.add_greedy_outputs("old-host", "m", "w", ["c"])
        store.add_greedy_outputs("old-host", "m", "other", ["d"])
        found = store.greedy_outputs("old-host", "m", "w")
        assert found is not None and found[1] == ["c"]

    def add_note(conn: sqlite3.Connection) -> None:
        conn.execute("ALTER TABLE runs ADD COLUMN note TEXT NOT NULL DEFAULT ''")

    monkeypatch.setattr(store_mod, "MIGRATIONS", [*store_mod.MIGRATIONS, add_note])
    monkeypatch.setattr(store_mod, "SCHEMA_VERSION", current + 1)
    with Store(db) as store:
        assert store.schema_version == current + 1
        assert [r.meta.host for r in store.runs()] == ["old-host"]  # rows read by name: the new column is ignored
    monkeypatch.setattr(store_mod, "SCHEMA_VERSION", current)
    with pytest.raises(SpecdashError, match="newer"):
        Store(db)
