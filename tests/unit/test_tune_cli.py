"""`specdash tune` bad input (one message, exit 2, nothing started) and the `[tune.NAME]` config table."""

from __future__ import annotations

from pathlib import Path

import pytest

from specdash.cli import main
from specdash.config import parse
from specdash.engines.registry import names
from specdash.errors import UsageError

SPACE = ("--space", "steps=1,3 topk=1,4 draft=4")


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (("--space", "steps=1,3"), "needs all three of steps, topk and draft"),
        (("--space", "steps=1 k=2"), "mixes"),
        (("--space", "k=1,2"), "mode eagle3 is SGLang"),
        (("--space", "depth=2"), "expected NAME=V1,V2"),
        ((*SPACE, "--repeats", "0"), "--repeats must be between 1 and 10, got 0"),
        ((*SPACE, "--levels", "0"), "between 1 and 1024, got 0"),
        ((*SPACE, "--noise-floor", "1.5"), "--noise-floor must be in [0, 1)"),
        ((*SPACE, "--time-scale", "0"), "--time-scale is for HOST demo only, in (0, 10]"),
        ((*SPACE, "--duration", "-1"), "--duration must be positive"),
        ((*SPACE, "--name", "a/b"), "--name 'a/b'"),
        ((*SPACE, "--tune", "nope"), "no [tune.nope]"),
        ((), "--space is required"),
    ],
)
def test_bad_input_is_one_message_and_exit_2(
    argv: tuple[str, ...], needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["tune", "demo", "--mode", "eagle3", *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and needle in err[0], err
    assert "Traceback" not in err[0]


def test_unknown_mode_names_the_known_ones(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tune", "demo", "--mode", "nope", *SPACE]) == 2
    assert "nope" in capsys.readouterr().err


def test_resume_of_another_tune_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    j = tmp_path / "j"
    j.mkdir()
    (j / "x.jsonl").write_text(
        '{"type": "header", "version": 1, "name": "x", "host": "demo", "base_mode": "eagle3", '
        '"baseline_mode": "baseline", "space": "steps=2 topk=1 draft=3", "levels": [1], "repeats": 1}\n'
    )
    argv = ["tune", "demo", "--mode", "eagle3", *SPACE, "--name", "x", "--journal-dir", str(j)]
    assert main([*argv, "--levels", "1", "--repeats", "1"]) == 2
    assert "add --resume" in capsys.readouterr().err
    assert main([*argv, "--levels", "1", "--repeats", "1", "--resume"]) == 2
    assert "is for space = 'steps=2 topk=1 draft=3'" in capsys.readouterr().err


MODES = '[modes.eagle3]\nengine = "sglang"\nmodel = "/m"\n[modes.baseline]\nengine = "sglang"\nmodel = "/m"\n'


def test_tune_table_is_validated() -> None:
    cfg = parse(
        MODES + '[tune.night]\nmode = "eagle3"\nspace = "steps=1,2 topk=1 draft=2"\nrepeats = 3\n',
        Path("c"),
        engines=names(),
    )
    t = cfg.tunes["night"]
    assert (t.mode, t.baseline, t.space, t.repeats, t.levels) == (
        "eagle3",
        "baseline",
        "steps=1,2 topk=1 draft=2",
        3,
        "",
    )
    with pytest.raises(UsageError, match=r"\[tune.night\] mode: no mode named 'x'"):
        parse(MODES + '[tune.night]\nmode = "x"\nspace = "k=1"\n', Path("c"), engines=names())
    with pytest.raises(UsageError, match=r"\[tune.night\] space"):
        parse(MODES + '[tune.night]\nmode = "eagle3"\n', Path("c"), engines=names())
    with pytest.raises(UsageError, match="unknown key"):
        parse(MODES + '[tune.night]\nmode = "eagle3"\nspace = "k=1"\nfoo = 1\n', Path("c"), engines=names())


def test_the_probe_endpoint_follows_the_engine() -> None:
    """vLLM has no /generate: a tune of a vLLM mode that used it measured nothing (every request 404)."""
    from specdash.bench.sse import Endpoint
    from specdash.cli.tune import default_endpoint

    assert default_endpoint("sglang") is Endpoint.GENERATE
    assert default_endpoint("vllm") is Endpoint.COMPLETIONS


def test_the_dashboard_and_the_cli_build_the_same_plan_from_a_tune_table() -> None:
    """One plan builder: a tune started in the dashboard is the one `specdash tune HOST --tune NAME --resume`
    continues (same journal name and header); an entry that cannot run says why."""
    import argparse

    from specdash.cli.tune import _check_tune, add_arguments, make_plan
    from specdash.tune.plan import plan_for_entry, tune_entries

    cfg = parse(
        MODES + '[tune.night]\nmode = "eagle3"\nspace = "steps=1,3 topk=1,4 draft=4"\nlevels = "1,4"\n'
        '[tune.bad]\nmode = "eagle3"\nspace = "k=1,2"\n',
        Path("c"),
        engines=names(),
    )
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(["gpu1", "--tune", "night"])
    cli = make_plan(args, cfg, _check_tune(args, cfg))
    dashboard = plan_for_entry(cfg, cfg.tunes["night"], "gpu1")
    assert cli == dashboard and cli.name == "night" and cli.header() == dashboard.header()
    night, bad = tune_entries(cfg, "gpu1")
    assert (night.settings, night.levels, night.repeats, night.max_restarts, night.problem) == (4, (1, 4), 2, 10, "")
    assert "mode eagle3 is SGLang" in bad.problem and bad.max_restarts == 0
