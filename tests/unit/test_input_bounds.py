"""Bounds on what specdash reads (issue 29 points 5 and 9): each input has a stated bound (`specdash.limits`),
checked before the work, and the work is linear in it."""

from __future__ import annotations

import codecs
import io
from pathlib import Path

import pytest

from specdash.config import load, parse
from specdash.core.lines import LineSplitter
from specdash.core.timeline import replay_file, replay_text, text_encoding
from specdash.errors import UsageError
from specdash.limits import MAX_EXTENDS_DEPTH, MAX_LOG_LINE_CHARS

ENGINES = ("sglang", "vllm")


def _chain(depth: int) -> str:
    """A config whose mode `m{depth-1}` extends ... extends `m0`: a chain of `depth` modes."""
    head = '[modes.m0]\nengine = "sglang"\nmodel = "m"\nargs = ["--a0"]\n'
    return head + "".join(f'[modes.m{i}]\nextends = "m{i - 1}"\nargs = ["--a{i}"]\n' for i in range(1, depth))


def test_extends_chain_up_to_the_bound_is_resolved() -> None:
    cfg = parse(_chain(MAX_EXTENDS_DEPTH), Path("c.toml"), engines=ENGINES)
    last = cfg.mode(f"m{MAX_EXTENDS_DEPTH - 1}")
    assert last.args == tuple(f"--a{i}" for i in range(MAX_EXTENDS_DEPTH))
    assert last.engine == "sglang"


@pytest.mark.parametrize("depth", [MAX_EXTENDS_DEPTH + 1, 1000, 20_000])
def test_extends_chain_over_the_bound_is_one_usage_error(depth: int) -> None:
    """1,000 deep was a RecursionError after 12 s; now refused by name at the bound, whatever the depth."""
    with pytest.raises(UsageError, match=f"deeper than {MAX_EXTENDS_DEPTH}"):
        parse(_chain(depth), Path("c.toml"), engines=ENGINES)


def test_extends_chain_in_reverse_order_and_cycles() -> None:
    reverse = '[modes.c]\nextends = "b"\n[modes.b]\nextends = "a"\n[modes.a]\nengine = "vllm"\nmodel = "m"\n'
    assert parse(reverse, Path("c.toml"), engines=ENGINES).mode("c").engine == "vllm"
    cycle = '[modes.a]\nextends = "b"\n[modes.b]\nextends = "c"\n[modes.c]\nextends = "a"\n'
    with pytest.raises(UsageError, match="cycle a -> b -> c -> a"):
        parse(cycle, Path("c.toml"), engines=ENGINES)
    with pytest.raises(UsageError, match="cycle a -> a"):
        parse('[modes.a]\nextends = "a"\n', Path("c.toml"), engines=ENGINES)


def test_many_modes_extending_one_parent() -> None:
    wide = _chain(1) + "".join(f'[modes.w{i}]\nextends = "m0"\n' for i in range(2000))
    cfg = parse(wide, Path("c.toml"), engines=ENGINES)
    assert len(cfg.modes) == 2001 and cfg.mode("w1999").args == ("--a0",)


@pytest.mark.parametrize("bom", [codecs.BOM_UTF8])
def test_config_with_a_byte_order_mark_is_read(bom: bytes, tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_bytes(bom + _chain(2).encode())
    assert load(path, engines=ENGINES).mode("m1").model == "m"


def test_line_splitter_cuts_long_lines_in_one_pass() -> None:
    splitter = LineSplitter()
    text = "\x00" * (10 * MAX_LOG_LINE_CHARS + 5) + "\nshort\n" + "y" * (3 * MAX_LOG_LINE_CHARS)
    lines = splitter.feed(text) + splitter.flush()
    assert all(len(line) <= MAX_LOG_LINE_CHARS for line in lines)
    assert "".join(lines) == text.replace("\n", "")
    assert "short" in lines


def test_replay_text_of_a_nul_tail_is_bounded() -> None:
    """What `status` replays: 4 MB of NULs (took 370 MB and 10 s) is lines of bounded length."""
    timeline = replay_text("\x00" * 4_000_000, "sglang")
    assert timeline.evidence_lines == 0


@pytest.mark.parametrize(
    ("codec", "detected"),
    [
        ("utf-16", "utf-16"),
        ("utf-16-le", "utf-16-le"),
        ("utf-16-be", "utf-16-be"),
        ("utf-8-sig", "utf-8-sig"),
        ("utf-8", "utf-8"),
    ],
)
def test_replay_reads_utf16_and_bom_logs(codec: str, detected: str) -> None:
    text = (
        "[2026-03-22 13:53:37] server_args=ServerArgs(model_path='m', speculative_algorithm='EAGLE')\n"
        "[2026-03-22 13:53:40] Load weight begin. avail mem=78.00 GB\n"
        "[2026-03-22 13:54:40] Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=60.00 GB\n"
        "[2026-03-22 13:55:40] The server is fired up and ready to roll!\n"
    )
    data = text.encode(codec)
    assert text_encoding(data) == detected
    timeline = replay_file(io.BytesIO(data))
    assert timeline.engine == "sglang" and timeline.evidence_lines >= 2, timeline.as_dict()
