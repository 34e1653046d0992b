"""Paths and values that used to end in an internal error (issue 29 point 6): one line naming the path or the
value, exit 2 for what the command line got wrong, exit 1 for what only the write could tell.

Through the real CLI in subprocesses. Output paths that are a directory, missing, under /proc or /dev/full
(export, report, `config init --force`); bad XDG directories; text that is not UTF-8; integers of hundreds of
digits in every integer flag tried here; run ids at and beyond SQLite's largest rowid.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.support.hostile_cli import Done, assert_clean_failure, run_cli
from tests.support.results_store import make_store

BIG = "9" * 400
HUGE = "1" + "0" * 5000
NOT_UTF8 = os.fsdecode(b"p\xff.jsonl")
URL = ("bench", "--url", "http://127.0.0.1:9")


def cases(base: Path) -> list[tuple[str, tuple[str, ...], dict[str, str], int, tuple[str, ...]]]:
    """(id, argv, environment, exit code, needles in the one error line)."""
    db = str(base / "runs.db")
    ok_file = str(base / "out.txt")
    store = ("--db", db)
    out: list[tuple[str, tuple[str, ...], dict[str, str], int, tuple[str, ...]]] = [
        # output paths
        ("export-o-directory", ("export", "1", "--csv", *store, "-o", str(base)), {}, 2, ("--output", "directory")),
        ("export-o-no-dir", ("export", "1", "--json", *store, "-o", f"{base}/no/x.json"), {}, 2, ("does not exist",)),
        ("export-o-under-file", ("export", "1", "--csv", *store, "-o", f"{db}/x.csv"), {}, 2, ("not a directory",)),
        ("export-o-proc", ("export", "1", "--csv", *store, "-o", "/proc/specdash-x.csv"), {}, 1, ("/proc/specdash",)),
        ("export-o-dev-full", ("export", "1", "--csv", "--samples", *store, "-o", "/dev/full"), {}, 1, ("/dev/full",)),
        ("report-o-directory", ("report", "1", "2", *store, "-o", str(base)), {}, 2, ("--output", "directory")),
        ("report-o-dev-full", ("report", "1", "2", *store, "-o", "/dev/full"), {}, 1, ("/dev/full",)),
        ("report-png-is-file", ("report", "1", *store, "-o", ok_file, "--png", db), {}, 2, ("--png", "not a dir")),
        ("config-init-directory", ("config", "init", "--force", "--config", str(base)), {}, 2, ("is a directory",)),
        ("config-init-proc", ("config", "init", "--force", "--config", "/proc/x.toml"), {}, 1, ("/proc/x.toml",)),
        ("config-init-dev-full", ("config", "init", "--force", "--config", "/dev/full"), {}, 1, ("/dev/full",)),
        # XDG directories that cannot hold ours
        ("xdg-state-dev-null", ("status", "127.0.0.1:1"), {"XDG_STATE_HOME": "/dev/null"}, 1, ("XDG_STATE_HOME",)),
        ("xdg-state-a-file", ("logs", "127.0.0.1:1"), {"XDG_STATE_HOME": db}, 1, ("XDG_STATE_HOME", db)),
        ("xdg-data-dev-null", ("runs",), {"XDG_DATA_HOME": "/dev/null"}, 1, ("/dev/null/specdash",)),
        ("xdg-config-dev-null", ("config", "init"), {"XDG_CONFIG_HOME": "/dev/null"}, 1, ("XDG_CONFIG_HOME",)),
        # text that is not UTF-8 (a lone surrogate once decoded)
        ("prompts-not-utf8", (*URL, "--prompts", NOT_UTF8), {}, 2, ("--prompts", "not UTF-8", "0xff")),
        ("mode-not-utf8", (*URL, "--mode", "eagle\udce93"), {}, 2, ("--mode", "not UTF-8", "0xe9")),
        ("host-not-utf8", ("status", "h\udcffost"), {}, 2, ("HOST", "not UTF-8")),
        ("levels-not-utf8", (*URL, "--levels", "1,\udcc3"), {}, 2, ("--levels", "not UTF-8")),
        # integers of hundreds and thousands of digits, in every kind of integer flag
        ("bench-warmup-400", (*URL, "--warmup", BIG), {}, 2, ("--warmup", "between 0 and")),
        ("bench-processes-400", (*URL, "--processes", BIG), {}, 2, ("--processes",)),
        ("bench-max-concurrency-5000", (*URL, "--max-concurrency", HUGE), {}, 2, ("--max-concurrency",)),
        ("bench-check-greedy-400", (*URL, "--check-greedy", BIG), {}, 2, ("--check-greedy",)),
        ("bench-negative-400", (*URL, "--requests-per-level", "-" + BIG), {}, 2, ("--requests-per-level",)),
        ("tune-repeats-400", ("tune", "demo", "--repeats", BIG), {}, 2, ("--repeats",)),
        ("tune-max-blocks-400", ("tune", "demo", "--max-blocks", BIG), {}, 2, ("--max-blocks",)),
        ("tune-output-len-400", ("tune", "demo", "--output-len", BIG), {}, 2, ("--output-len",)),
        ("logs-n-400", ("logs", "127.0.0.1:1", "-n", BIG), {}, 2, ("--lines",)),
        ("runs-n-5000", ("runs", "-n", HUGE), {}, 2, ("--limit",)),
        ("adopt-port-400", ("adopt", "127.0.0.1:1", "--port", BIG), {}, 2, ("--port",)),
        ("adopt-pid-400", ("adopt", "127.0.0.1:1", "--pid", BIG), {}, 2, ("--pid",)),
        ("sim-tp-400", ("sim", "--model-path", "/m", "--tp", BIG), {}, 2, ("--tp",)),
        ("sim-port-70000", ("sim", "--model-path", "/m", "--port", "70000"), {}, 2, ("--port", "65535")),
        ("sim-seed-5000", ("sim", "--model-path", "/m", "--sim-seed", HUGE), {}, 2, ("--sim-seed",)),
        # the values tune used to accept that bench refused (issue 29 point 7), and the simulator's bounds
        ("tune-duration-nan", ("tune", "demo", "--duration", "nan"), {}, 2, ("--duration", "finite")),
        ("tune-requests-1e20", ("tune", "demo", "--requests-per-level", "1" + "0" * 20), {}, 2, ("--requests",)),
        ("tune-output-len-1e20", ("tune", "demo", "--output-len", "1" + "0" * 20), {}, 2, ("--output-len",)),
        ("tune-precision-inf", ("tune", "demo", "--precision", "inf"), {}, 2, ("--precision", "finite")),
        ("tune-hold-zero", ("tune", "demo", "--hold", "0"), {}, 2, ("--hold", "more than 0")),
        ("sim-tp-zero", ("sim", "--model-path", "/m", "--tp", "0"), {}, 2, ("--tp", "between 1 and")),
        ("sim-time-scale-nan", ("sim", "--model-path", "/m", "--sim-time-scale", "nan"), {}, 2, ("--sim-time-scale",)),
        ("adopt-port-zero", ("adopt", "127.0.0.1:1", "--port", "0"), {}, 2, ("--port", "between 1 and 65535")),
        ("demo-time-scale-negative", ("demo", "--time-scale", "-1"), {}, 2, ("--time-scale",)),
        # run ids at SQLite's largest rowid and beyond
        ("export-id-2^63", ("export", str(2**63), "--csv", *store), {}, 2, ("RUN", str(2**63))),
        ("export-id-400", ("export", BIG, "--json", *store), {}, 2, ("RUN",)),
        ("compare-id-2^64", ("compare", "1", str(2**64), *store), {}, 2, ("RUN", str(2**64))),
        ("report-id-2^63", ("report", str(2**63), *store, "-o", ok_file), {}, 2, ("RUN",)),
        ("compare-id-zero", ("compare", "0", "1", *store), {}, 2, ("RUN",)),
        ("report-id-max-missing", ("report", str(2**63 - 1), *store, "-o", ok_file), {}, 2, ("no run", str(2**63 - 1))),
    ]
    return out


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Done, int, tuple[str, ...]]]:
    base = tmp_path_factory.mktemp("paths-values")
    make_store(base / "runs.db")

    def one(case: tuple[str, tuple[str, ...], dict[str, str], int, tuple[str, ...]]) -> Done:
        return run_cli(case[1], base / "homes" / case[0], env_over=case[2])

    table = cases(base)
    with ThreadPoolExecutor(max_workers=4) as pool:
        done = list(pool.map(one, table))
    return {c[0]: (d, c[3], c[4]) for c, d in zip(table, done, strict=True)}


@pytest.mark.parametrize("case", [c[0] for c in cases(Path("/base"))])
def test_one_line_naming_the_path_or_value(case: str, outcomes: dict[str, tuple[Done, int, tuple[str, ...]]]) -> None:
    done, code, needles = outcomes[case]
    assert_clean_failure(done, code, *needles)
    assert "internal error" not in done.stderr


def test_a_good_output_path_still_works(tmp_path: Path) -> None:
    """The checks refuse what cannot work, nothing else: a new file in an existing directory is written."""
    db = tmp_path / "runs.db"
    make_store(db)
    out = tmp_path / "new.csv"
    done = run_cli(("export", "1", "--csv", "--db", str(db), "-o", str(out)), tmp_path / "home")
    assert done.code == 0, done.stderr
    assert out.read_text().startswith(done.stdout[:0] or out.read_text()[:1]) and out.stat().st_size > 0


def test_stdout_to_a_full_disk_is_an_error(tmp_path: Path) -> None:
    """`specdash export 1 --csv > /dev/full` used to end 0 with Python's 'Exception ignored' at exit."""
    db = tmp_path / "runs.db"
    make_store(db)
    home = tmp_path / "home"
    home.mkdir()
    import subprocess
    import sys

    from tests.support.hostile_cli import cli_env

    with open("/dev/full", "w") as full:
        proc = subprocess.run(
            [sys.executable, "-m", "specdash", "export", "1", "--csv", "--samples", "--db", str(db)],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            env=cli_env(home),
            cwd=home,
            timeout=120,
        )
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr and "No space left" in proc.stderr, proc.stderr
