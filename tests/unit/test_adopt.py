"""What a hand-started server's command line says: engine, flags, the configured mode it matches, its log."""

from __future__ import annotations

from pathlib import Path

import pytest

from specdash import config
from specdash.config import HostConfig
from specdash.engines.registry import names
from specdash.server.adopt import Found, assess, engine_of, find_log, flags_of

CONFIG = """
[modes.baseline]
engine = "sglang"
model = "/models/llama"
port = 30000
args = ["--tp", "2"]

[modes.vllm-eagle]
engine = "vllm"
model = "/models/llama"
port = 8000
args = ["--speculative-config", '{"method": "eagle3"}']
"""
HOST = HostConfig(name="gpu", address="gpu", python="python3")


def found(argv: list[str], **kw: object) -> Found:
    base: dict[str, object] = dict(
        pid=100, pgid=100, sid=100, started_at=0.0, argv=tuple(argv), cwd="/srv", stdout="/srv/out.log",
        stderr="/srv/out.log", same_user=True, members=("100 python",),
    )  # fmt: skip
    base.update(kw)
    return Found(**base)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("argv", "engine"),
    [
        (["python3", "-m", "sglang.launch_server", "--model-path", "m"], "sglang"),
        (["/opt/venv/bin/sglang", "serve", "--model-path", "m"], "sglang"),
        (["/usr/bin/python3.11", "-m", "specdash", "sim", "--model-path", "m"], "sglang"),
        (["/venv/bin/vllm", "serve", "meta/llama", "--port", "8001"], "vllm"),
        (["python", "-m", "vllm.entrypoints.openai.api_server", "--model", "m"], "vllm"),
        (["python", "train.py", "--port", "30000"], ""),
    ],
)
def test_engine_from_the_command_line(argv: list[str], engine: str) -> None:
    assert engine_of(argv) == engine


def test_flags_with_values_equals_switches_and_aliases() -> None:
    argv = ["python", "-m", "sglang.launch_server", "--model", "m", "--tp=4", "--enable-metrics", "--port", "1"]
    assert flags_of(argv) == {"model-path": "m", "tp-size": "4", "enable-metrics": "", "port": "1"}
    assert flags_of(["vllm", "serve", "org/m", "--max_num_seqs", "8"]) == {"model-path": "org/m", "max-num-seqs": "8"}


def test_matches_a_configured_mode_by_its_flags(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text(CONFIG)
    cfg = config.load(path, engines=names())
    argv = ["python3", "-m", "sglang.launch_server", "--model-path", "/models/llama", "--host", "127.0.0.1",
            "--port", "30000", "--tp", "2"]  # fmt: skip
    a = assess(found(argv), cfg, HOST)
    assert (a.ok, a.engine, a.mode, a.matched, a.port) == (True, "sglang", "baseline", True, 30000)
    # One flag more: not that mode; shown unmanaged with its flags.
    b = assess(found([*argv, "--enable-metrics"]), cfg, HOST)
    assert (b.ok, b.mode, b.matched) == (True, "adopted-100", False)
    assert "--enable-metrics" in b.describe() and "matches no configured mode" in b.describe()


def test_the_log_comes_from_stdout_stderr_an_argument_or_the_user() -> None:
    f = found([], stdout="/dev/null", stderr="pipe:[42]", cwd="/srv")
    assert find_log(f, {"log-file": "logs/s.log"}) == ("/srv/logs/s.log", "--log-file")
    assert find_log(f, {}) == ("", "")
    assert find_log(f, {}, given="x.log") == ("/srv/x.log", "given")
    assert find_log(found([], stdout="/srv/a.log (deleted)", stderr="/srv/b.log"), {}) == ("/srv/b.log", "stderr")


def test_every_reason_not_to_adopt_is_said(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text(CONFIG)
    f = found(["python", "train.py"], pgid=90, stdout="/dev/null", stderr="/dev/null", same_user=False,
              members=("90 bash run.sh", "100 python train.py"))  # fmt: skip
    a = assess(f, config.load(path, engines=names()), HOST)
    assert not a.ok
    text = " | ".join(a.problems)
    assert "another user" in text and "neither SGLang" in text and "90 bash run.sh" in text and "--log PATH" in text
