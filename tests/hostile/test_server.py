"""A hostile server against the real `specdash bench --url` (issue 14, points 3, 4, 8, 9).

A broken response fails that request with a reason, never the process: exit 1 with one line naming the
failed level when every request of it failed (exit 0 when only the control plane misbehaved), no
traceback, bounded memory, and every request stored.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from tests.hostile.cli import MEMORY_BOUND_MIB, Done, assert_clean_failure, run_cli
from tests.hostile.hostile_server import CONTROL_BEHAVIOURS, ESCAPES, hostile_server

REQUESTS = 2

# behaviour -> what the stored failure detail must say
REQUEST_CASES = {
    "huge_count": "token count",
    "digits_count": "token count",
    "nested_json": "RecursionError",
    "endless_chunk_line": "chunk-size line longer",
    "ignores_max_tokens": "content chunks",
    "http500": "HTTP 500",
    "escape_error": "\\x1b",
    "huge_event": "SSE event larger",
}


def bench(port: int, home: Path, db: Path) -> Done:
    return run_cli(
        (
            "bench",
            "--url",
            f"http://127.0.0.1:{port}",
            "--levels",
            "1",
            "--requests-per-level",
            str(REQUESTS),
            "--warmup",
            "0",
            "--output-len",
            "8",
            "--processes",
            "0",
            "--stall-timeout",
            "10",
            "--request-timeout",
            "60",
            "--db",
            str(db),
        ),  # fmt: skip
        home,
        timeout=240,
    )


def stored(db: Path) -> list[tuple[str | None, str]]:
    with sqlite3.connect(db) as con:
        return [(r[0], r[1]) for r in con.execute("SELECT error, detail FROM samples")]


@pytest.mark.parametrize("behaviour", sorted(REQUEST_CASES))
def test_a_hostile_response_fails_only_its_requests(behaviour: str, tmp_path: Path) -> None:
    db = tmp_path / "store.db"
    with hostile_server(behaviour) as server:
        done = bench(server.port, tmp_path / "home", db)
    assert_clean_failure(done, 1, "level(s) failed", "C=1")
    rows = stored(db)
    assert len(rows) == REQUESTS, rows  # nothing collected is lost
    for error, detail in rows:
        assert error is not None
        assert REQUEST_CASES[behaviour] in detail, detail
        assert "\x1b" not in detail
    assert "\x1b" not in done.stdout + done.stderr  # the server's escapes never reach the terminal


@pytest.mark.parametrize("behaviour", CONTROL_BEHAVIOURS)
def test_a_hostile_control_plane_costs_only_that_poll(behaviour: str, tmp_path: Path) -> None:
    db = tmp_path / "store.db"
    with hostile_server(behaviour) as server:
        done = bench(server.port, tmp_path / "home", db)
        redirect_hits = server.redirect_hits
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    assert done.code == 0, done.stderr[-2000:]
    assert done.peak_rss_mib < MEMORY_BOUND_MIB, done.peak_rss_mib
    rows = stored(db)
    assert len(rows) == REQUESTS and all(error is None for error, _ in rows), rows
    assert redirect_hits == 0  # a redirect to another origin is not followed


def test_credentials_in_the_url_are_not_stored(tmp_path: Path) -> None:
    db = tmp_path / "store.db"
    with hostile_server("info_not_utf8") as server:
        url = f"http://alice:s3cret-pw@127.0.0.1:{server.port}"
        done = run_cli(
            (
                "bench",
                "--url",
                url,
                "--levels",
                "1",
                "--requests-per-level",
                "1",
                "--warmup",
                "0",
                "--output-len",
                "4",
                "--processes",
                "0",
                "--db",
                str(db),
            ),  # fmt: skip
            tmp_path / "home",
        )
    assert done.code == 0, done.stderr[-2000:]
    assert b"s3cret-pw" not in db.read_bytes()
    for extra in db.parent.glob("store.db-*"):
        assert b"s3cret-pw" not in extra.read_bytes()
    assert "s3cret-pw" not in done.stdout
    assert db.stat().st_mode & 0o077 == 0  # the store is private
    with sqlite3.connect(db) as con:
        host, base_url = con.execute("SELECT host, base_url FROM runs").fetchone()
    assert "s3cret" not in host + base_url and json.dumps([host, base_url])
    assert ESCAPES  # (the escape case above uses it)
