"""Running the simulator as the remote test user: the launcher, and configs whose modes use it.

The test user cannot execute the developer's venv interpreter (it lives under /root on our machines), so
the simulator runs under the system `python3` (the same 3.11 ABI) with the venv's site-packages and the
source tree on PYTHONPATH.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import shutil
import sys
import sysconfig
from pathlib import Path

from specdash import config
from specdash.config import Config, HostConfig, ModeConfig
from specdash.engines.registry import names
from specdash.server.launch import launch_argv, launch_env

SRC = Path(__file__).resolve().parents[2]


def remote_python() -> str:
    """An interpreter the test user may execute, with the same minor version as ours."""
    minor = f"python{sys.version_info.major}.{sys.version_info.minor}"
    for candidate in (f"/usr/bin/{minor}", shutil.which(minor) or ""):
        if candidate and Path(candidate).is_file() and not candidate.startswith("/root"):
            return candidate
    raise RuntimeError(f"no system {minor} for the remote test user")


QUICK_STARTUP = 0.005
"""The simulated startup's pace where a test only waits for READY: a start in about 3 s (2.5 s baseline, 2.9 s
EAGLE-3, alone on the dev VM); a test that acts while the startup runs passes a slower one."""


def sim_config(
    tmp: Path, *, port: int, time_scale: float = QUICK_STARTUP, tp: int = 2, extra_modes: str = ""
) -> Config:
    """A config with one host entry unused (tests pass HostConfig themselves) and simulator modes."""
    launcher = [remote_python(), "-m", "specdash", "sim"]
    pythonpath = f"{SRC}:{sysconfig.get_paths()['purelib']}"
    text = f"""
[modes.baseline]
engine = "sglang"
model = "/models/kimi-k2.5"
port = {port}
launcher = {launcher!r}
args = ["--tp", "{tp}", "--sim-time-scale", "{time_scale}", "--sim-seed", "1"]
env = {{ PYTHONPATH = "{pythonpath}" }}
stop_timeout = 10

[modes.eagle3]
extends = "baseline"
args = ["--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "/models/eagle3",
        "--speculative-num-steps", "2", "--speculative-eagle-topk", "4", "--speculative-num-draft-tokens", "16"]

[modes.crash]
extends = "eagle3"
args = ["--sim-disable-spec-above", "4", "--sim-fault", "crash-at-batch=10"]
{extra_modes}
"""
    path = tmp / "config.toml"
    path.write_text(text.replace("'", '"'))
    return config.load(path, engines=names())


def with_host(cfg: Config, name: str, address: str, key: Path, known_hosts: Path, state_dir: str) -> dict[str, str]:
    """Add `[hosts.NAME]` (the test sshd at `address`) to `cfg`'s file; the environment that makes the CLI
    read it."""
    assert cfg.path is not None
    cfg.path.write_text(cfg.path.read_text() + f"""
[hosts.{name}]
address = "{address}"
identity_file = "{key}"
known_hosts = "{known_hosts}"
state_dir = "{state_dir}"
""")  # fmt: skip
    return {**os.environ, "SPECDASH_CONFIG": str(cfg.path)}


def by_hand_command(mode: ModeConfig, host: HostConfig, log: str) -> str:
    """What a user types to start `mode` on `host` without specdash: the server leads its own group and session
    (`setsid nohup`), output to `~/LOG`; the shell prints its PID."""
    env = [f"{k}={v}" for k, v in launch_env(mode, host).items()]
    argv = launch_argv(mode, host)
    return f"cd ~; setsid nohup env {shlex.join(env)} {shlex.join(argv)} > {log} 2>&1 < /dev/null & echo $!"


async def overload(port: int, streams: int = 12, tokens: int = 300) -> None:
    """`streams` concurrent /generate requests on 127.0.0.1:`port`: pushes the batch past the crash fault's 10.

    Each request is expected to fail when the server dies mid-stream; those errors are the point, not a result.
    """
    import aiohttp

    async with aiohttp.ClientSession() as http:

        async def one() -> None:
            body = {"text": "hi", "sampling_params": {"max_new_tokens": tokens, "ignore_eos": True}}
            with contextlib.suppress(aiohttp.ClientError):
                async with http.post(f"http://127.0.0.1:{port}/generate", json=body) as resp:
                    await resp.read()

        await asyncio.gather(*(one() for _ in range(streams)))
