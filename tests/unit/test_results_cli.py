"""`specdash runs`, `compare`, `report` over a store with a synthetic A/B (real store, real CLI parser)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from specdash.bench.store import Store
from specdash.cli import main
from tests.support.results_store import BASE, SPEC, add_run, make_store


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "s.db"
    make_store(path)
    return path


def test_runs_lists_newest_first_with_the_sweep_verdict(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["runs", "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert out.index("eagle3") < out.index("baseline")
    assert out.count("eagle3 beats baseline up to C≈3.7") == 2  # one sweep: shown on both of its runs
    assert main(["runs", "--db", str(db), "--mode", "baseline", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["id"], r["mode"], r["levels"]) for r in rows] == [(1, "baseline", [1, 2, 5, 10, 20])]
    assert main(["runs", "--db", str(db), "--host", "elsewhere"]) == 0
    assert "no runs match" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["runs", "--since", "yesterday"], "--since: expected a date"),
        (["runs", "--limit", "0"], "--limit: must be between 1 and"),
        (["compare", "1", "2", "--slo", "ttft=5"], "--slo: 'ttft=5': expected METRIC_pNN=VALUE"),
        (["report", "1", "9"], "no run 9"),
    ],
)
def test_bad_input_exits_2_with_one_line(db: Path, argv: list[str], message: str,
                                         capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    assert main([*argv, "--db", str(db)]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_compare_refuses_different_workloads_unless_forced(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "s.db"
    with Store(db) as store:
        a = add_run(store, "baseline", BASE)
        b = add_run(store, "eagle3", SPEC, accept=2.5, output_len=32)
    assert main(["compare", str(a), str(b), "--db", str(db)]) == 2
    assert "output_len: 64 vs 32" in capsys.readouterr().err
    assert main(["compare", str(a), str(b), "--db", str(db), "--force"]) == 0
    out = capsys.readouterr().out
    assert "NOT LIKE FOR LIKE (--force)" in out and "output_len: 64 vs 32" in out


def test_compare_speedup_pareto_and_slo(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", "1", "2", "--db", str(db), "--slo", "ttft_p90=80ms,tpot_p90=30ms"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^ 1 +71\.\d +123\.\d +1\.73x +\+73\.\d$", out, re.M)
    assert "baseline up to C=10, eagle3 up to C=5" in out
    pareto = out[out.index("Pareto") :]
    starred = {m.group(1, 2) for m in re.finditer(r"^ *(\w+) +(\d+) .*\*$", pareto, re.M)}
    assert starred == {("eagle3", "1"), ("eagle3", "2"), ("baseline", "5"), ("baseline", "10"), ("baseline", "20")}


def test_report_is_self_contained_and_writes_pngs(db: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    assert main(["report", "1", "2", "--db", str(db), "-o", str(out), "--png", str(tmp_path / "png"),
                 "--slo", "ttft_p90=80ms"]) == 0  # fmt: skip
    page = out.read_text()
    assert "eagle3 beats baseline up to C≈3.7" in page
    assert not re.search(r"<(script|link|img|iframe)\b", page)
    refs = re.findall(r"""(?:src|href)=["']([^"']*)""", page)
    assert refs and all(r.startswith("#") for r in refs)  # only the SVGs' own glyph references
    assert "@import" not in page and all(u.startswith("#") for u in re.findall(r"url\(([^)]*)\)", page))
    for name in ("tok_s", "speedup", "pareto", "latency", "acceptance", "goodput"):
        assert f"id='chart-{name}'" in page
        assert (tmp_path / "png" / f"{name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "NVIDIA H100 80GB HBM3" in page and "--speculative-algorithm EAGLE3" in page
    accept = page[page.index("<h2>Acceptance</h2>") : page.index("<h2>Provenance</h2>")]
    assert "<h3>eagle3</h3>" in accept and "<h3>baseline</h3>" not in accept
    assert "<td>62 %</td>" in accept and "80 % · 50 %" in accept  # 1 - 1/2.6 from drafts; positions 1, 2


def test_old_store_gets_the_provenance_column(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "old.db"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE runs (id INTEGER PRIMARY KEY, created TEXT NOT NULL, host TEXT NOT NULL, mode TEXT"
                " NOT NULL, engine TEXT NOT NULL DEFAULT '', engine_version TEXT NOT NULL DEFAULT '', server_args"
                " TEXT NOT NULL DEFAULT '{}', prompt_set TEXT NOT NULL DEFAULT '', prompt_hash TEXT NOT NULL DEFAULT"
                " '', endpoint TEXT NOT NULL DEFAULT '', output_len INTEGER NOT NULL DEFAULT 0, base_url TEXT NOT"
                " NULL DEFAULT '', config TEXT NOT NULL DEFAULT '{}', status TEXT NOT NULL DEFAULT 'running',"
                " finished TEXT)")  # fmt: skip
    con.execute("INSERT INTO runs (created, host, mode) VALUES ('2026-01-01T00:00:00+00:00', 'h', 'm')")
    con.commit()
    con.close()
    with Store(path) as store:
        rec = store.run(1)
        assert rec is not None and rec.meta.provenance == {}
