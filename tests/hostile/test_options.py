"""Hostile option values (issue 14, points 5, 7, 9): refused at parse time, exit 2, naming the option.

Table-driven through the real CLI, plus a property over the parser: no finite-looking or non-finite
number outside an option's range is ever accepted.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import math
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specdash.cli import build_parser
from tests.support.hostile_cli import Done, assert_clean_failure, run_cli

CONFIG = """
[hosts.box]
address = "u@127.0.0.1:1"

[modes.base]
engine = "sglang"
model = "/m"
"""
URL = ("bench", "--url", "http://127.0.0.1:9")

# (id, argv, needles in the one error line); every one exits 2.
CASES: list[tuple[str, tuple[str, ...], tuple[str, ...]]] = [
    ("stall-nan", (*URL, "--stall-timeout", "nan"), ("--stall-timeout", "finite")),
    ("stall-zero", (*URL, "--stall-timeout", "0"), ("--stall-timeout",)),
    ("stall-inf", (*URL, "--stall-timeout", "inf"), ("--stall-timeout", "finite")),
    ("request-timeout-negative", (*URL, "--request-timeout", "-1"), ("--request-timeout",)),
    ("request-timeout-huge", (*URL, "--request-timeout", "1e300"), ("--request-timeout", "at most")),
    ("level-timeout-nan", (*URL, "--level-timeout", "NaN"), ("--level-timeout",)),
    ("duration-inf", (*URL, "--duration", "inf"), ("--duration", "finite")),
    ("duration-negative", (*URL, "--duration", "-3"), ("--duration",)),
    ("output-len-1e20", (*URL, "--output-len", "100000000000000000000"), ("--output-len",)),
    ("output-len-5000-digits", (*URL, "--output-len", "9" * 5000), ("--output-len",)),
    ("output-len-float", (*URL, "--output-len", "1.5"), ("--output-len", "whole number")),
    ("requests-negative", (*URL, "--requests-per-level", "-4"), ("--requests-per-level",)),
    ("warmup-negative", (*URL, "--warmup", "-1"), ("--warmup",)),
    ("processes-huge", (*URL, "--processes", "100000"), ("--processes",)),
    ("max-concurrency-zero", (*URL, "--max-concurrency", "0"), ("--max-concurrency",)),
    ("repeats-huge", (*URL, "--repeats", "1000000"), ("--repeats",)),
    ("link-wait-nan", ("bench", "box", "--link-wait", "nan"), ("--link-wait",)),
    ("url-port-zero", ("bench", "--url", "http://127.0.0.1:0"), ("bad URL", "port 0")),
    ("url-ipv6-malformed", ("bench", "--url", "http://[::1"), ("bad URL", "IPv6")),
    ("url-ipv6-no-port-bracket", ("bench", "--url", "http://[zz::1]:80"), ("bad URL",)),
    ("url-with-jump", (*URL, "-J", "j@127.0.0.1"), ("-J", "HOST only")),
    ("url-with-link-policy", (*URL, "--on-link-loss", "stop"), ("--on-link-loss", "HOST only")),
    ("url-with-link-wait", (*URL, "--link-wait", "5"), ("--link-wait", "HOST only")),
    ("grace-negative", ("down", "box", "--grace", "-5"), ("--grace",)),
    ("grace-huge", ("down", "box", "--grace", "1000000"), ("--grace", "at most")),
    ("grace-nan", ("down", "box", "--grace", "nan"), ("--grace",)),
    ("levels-5000-digits", (*URL, "--levels", "9" * 5000), ("--levels",)),
]


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Done]:
    base = tmp_path_factory.mktemp("hostile-options")
    config = base / "config.toml"
    config.write_text(CONFIG)

    def one(case: tuple[str, tuple[str, ...], tuple[str, ...]]) -> Done:
        return run_cli(case[1], base / case[0], config)

    with ThreadPoolExecutor(max_workers=4) as pool:
        return dict(zip([c[0] for c in CASES], pool.map(one, CASES), strict=True))


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_option_refused_at_parse_time(
    case: tuple[str, tuple[str, ...], tuple[str, ...]], outcomes: dict[str, Done]
) -> None:
    done = outcomes[case[0]]
    assert_clean_failure(done, 2, *case[2])
    assert "internal error" not in done.stderr


TIME_OPTIONS = ("--stall-timeout", "--request-timeout", "--level-timeout", "--duration")


def _parse(argv: list[str]) -> argparse.Namespace | int:
    """Parse like the CLI does; the exit code when argparse refuses (its message is swallowed)."""
    with contextlib.redirect_stderr(io.StringIO()):
        try:
            return build_parser().parse_args(argv)
        except SystemExit as exc:
            return int(exc.code or 0)


@settings(max_examples=150, deadline=None)
@given(
    option=st.sampled_from(TIME_OPTIONS),
    value=st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.sampled_from(["nan", "-inf", "+inf", "1e999"])),
)
def test_time_options_accept_only_finite_positive_values(option: str, value: float | str) -> None:
    text = value if isinstance(value, str) else repr(value)
    got = _parse(["bench", "--url", "http://127.0.0.1:9", option, text])
    number = float(text)
    if math.isfinite(number) and 0 < number <= 7 * 86400:
        assert isinstance(got, argparse.Namespace)
        assert getattr(got, option[2:].replace("-", "_")) == number
    else:
        assert got == 2


@settings(max_examples=100, deadline=None)
@given(value=st.integers(min_value=-(10**30), max_value=10**30))
def test_output_len_range(value: int) -> None:
    got = _parse(["bench", "--url", "http://127.0.0.1:9", "--output-len", str(value)])
    assert (got == 2) == (not 1 <= value <= 1_000_000)


@settings(max_examples=100, deadline=None)
@given(value=st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.sampled_from(["nan", "1e+06", "1e-05"])))
def test_down_grace_range(value: float | str) -> None:
    text = value if isinstance(value, str) else repr(value)
    got = _parse(["down", "box", "--grace", text])
    number = float(text)
    assert (got == 2) == (not (math.isfinite(number) and 0 <= number <= 3600))


def test_config_path_is_not_read_for_usage_errors(tmp_path: Path) -> None:
    """A usage error never creates local state (no store, no log) as a side effect."""
    done = run_cli((*URL, "--stall-timeout", "nan"), tmp_path / "home")
    assert done.code == 2
    assert not (tmp_path / "home" / "xdg_data_home").exists()
