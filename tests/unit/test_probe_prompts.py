"""Prompt sets: the bundled chat and code sets, user JSONL files, the hash recorded with each run."""

from __future__ import annotations

from pathlib import Path

import pytest

from specdash.bench.prompts import BUNDLED, load_prompts
from specdash.errors import UsageError


@pytest.mark.parametrize("name", BUNDLED)
def test_bundled_sets_are_varied_and_stable(name: str) -> None:
    ps = load_prompts(name)
    assert 30 <= len(ps.prompts) <= 50
    assert len(set(ps.prompts)) == len(ps.prompts)
    assert ps.sha256 == load_prompts(name).sha256 and len(ps.sha256) == 64


def test_sets_differ_and_order_changes_the_hash(tmp_path: Path) -> None:
    assert load_prompts("chat").sha256 != load_prompts("code").sha256
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_text('{"prompt": "x"}\n{"text": "y"}\n\n')
    b.write_text('{"prompt": "y"}\n{"prompt": "x"}\n')
    pa, pb = load_prompts(str(a)), load_prompts(str(b))
    assert pa.prompts == ("x", "y") and pb.prompts == ("y", "x")
    assert pa.sha256 != pb.sha256


@pytest.mark.parametrize(
    ("content", "message"),
    [("not json\n", "not JSON"), ('{"other": 1}\n', "non-empty 'prompt'"), ("\n\n", "no prompts"), ('"x"\n', "prompt")],
)
def test_bad_user_files_are_usage_errors(tmp_path: Path, content: str, message: str) -> None:
    f = tmp_path / "p.jsonl"
    f.write_text(content)
    with pytest.raises(UsageError, match=message):
        load_prompts(str(f))


def test_unknown_name_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="not one of chat, code"):
        load_prompts("nope")
