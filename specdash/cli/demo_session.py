"""The session behind `specdash demo` (`cli/demo.py`): the product offline, against the built-in simulator.

An embedded SSH server on loopback (ephemeral keys, 127.0.0.1 only) stands in for the GPU host, and the
session connects to it through the normal SSH code path (`SSHHost`, known_hosts check, exec channels, port
forward). The demo's modes are real SGLang command lines whose launcher is `specdash sim`, at a time scale
that makes a full start take about 30 s. Run records go to a private temporary directory; bench runs and
startup history (for the ETA) go to the demo's own store (`data_dir()/demo.db`, `specdash runs --demo`),
never into the user's real one, unless `--db` names another.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from specdash.bench.probe import ProbeSettings
from specdash.bench.store import Store, demo_path
from specdash.bench.sweep import SweepConfig
from specdash.config import Config, HostConfig, ModeConfig, TuneConfig
from specdash.engines.spec_settings import SpecSetting, sglang_flags
from specdash.errors import SpecdashError
from specdash.ports import free_port
from specdash.remote.embedded import EmbeddedSSHServer
from specdash.remote.options import SSHOptions
from specdash.remote.ssh import SSHHost
from specdash.server.lifecycle import Lifecycle, run_script
from specdash.server.remote_session import RemoteSession
from specdash.sim.gpus import COUNT_ENV, DIR_ENV, install
from specdash.sim.spec_space import CALIBRATION_FLAGS, CHAIN_ANCHOR

if TYPE_CHECKING:
    from specdash.server.remote_session import RemoteSession

TIME_SCALE = 0.055
"""550 s x 0.055 = about 30 s for a simulated TP=8 EAGLE-3 start."""
TOUR_TIME_SCALE = 0.01
"""The autoplay tour's clock: about 6 s per start, so two starts and two sweeps fit in a minute."""
TOUR_LEVEL_S = 2.5
"""Seconds per level in the tour (5 s otherwise): steady state inside, 4 levels per mode."""
MODEL = "/models/Kimi-K2.5"
DRAFT = "/models/Kimi-K2.5-eagle3"


def demo_host_name(time_scale: float) -> str:
    """The demo host's name: its clock is part of what it is. The startup history (the ETA) is kept per host
    and mode, and a start at the tour's clock (6 s) must not predict one at the demo's (30 s)."""
    return "demo" if time_scale == TIME_SCALE else f"demo-{time_scale:g}x"


CHAIN = SpecSetting(*CHAIN_ANCHOR)
"""The spec-v2 mode's chain: SGLang's default (3, 1, 4) for DeepSeek-like models."""
DEMO_TUNE_SPACE = "steps=1,3 topk=1,4 draft=4,8"
"""The demo's `[tune.eagle3-demo]` space."""


def demo_config(port: int, time_scale: float = TIME_SCALE) -> Config:
    """The demo's modes: baseline, eagle3, eagle3-dynamic (crashes at batch 10) and spec-v2."""
    launcher = (sys.executable, "-m", "specdash", "sim")
    # --sim-exit-with: should the demo die without its cleanup (SIGKILL), its simulator follows it out.
    common = ("--tp", "8", "--enable-metrics", "--sim-time-scale", str(time_scale), "--sim-exit-with", str(os.getpid()))
    eagle = ("--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", DRAFT, *CALIBRATION_FLAGS)

    def mode(name: str, args: tuple[str, ...], description: str, env: dict[str, str] | None = None) -> ModeConfig:
        return ModeConfig(
            name=name,
            engine="sglang",
            model=MODEL,
            port=port,
            args=common + args,
            env=env or {},
            launcher=launcher,
            description=description,
            stop_timeout=10.0,
        )

    modes = [
        mode("baseline", (), "no speculation"),
        mode("eagle3", eagle, "EAGLE-3, 2 steps, topk 4, 16 draft tokens"),
        mode(
            "eagle3-dynamic",
            (*eagle, "--sim-disable-spec-above", "4", "--sim-fault", "crash-at-batch=10"),
            "EAGLE-3, speculation off above batch 4 (crashes at batch 10, as the field patch did)",
        ),
        mode(
            "spec-v2",
            ("--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", DRAFT, *sglang_flags(CHAIN)),
            "EAGLE-3 on the overlap scheduler (SGLANG_ENABLE_SPEC_V2=1)",
            {"SGLANG_ENABLE_SPEC_V2": "1"},
        ),
    ]
    # Resident modes: their servers sleep between switches instead of stopping (each on a port of its own).
    for name, args, text in (
        ("r-baseline", (), "no speculation; sleeps between switches (resident)"),
        ("r-eagle3", eagle, "EAGLE-3; sleeps between switches (resident)"),
    ):
        modes.append(replace(mode(name, args, text), port=free_port(), resident=True))  # launch adds the flags
    # The dashboard's Tune view (T) offers this one; `specdash tune demo --tune eagle3-demo` runs the same.
    tune = TuneConfig("eagle3-demo", "eagle3", DEMO_TUNE_SPACE, levels="1,4,16", repeats=1)
    return Config(path=None, hosts={}, modes={m.name: m for m in modes}, tunes={tune.name: tune})


def gpu_host_env(base: Path) -> dict[str, str]:
    """The demo host's login environment: the simulator's `nvidia-smi` first on PATH, its 8 GPUs, and a GPU
    state directory of the demo's own (another simulator on this machine must not show up in it)."""

    bin_dir = base / "bin"
    install(bin_dir)
    path = os.environ.get("PATH", "/usr/bin:/bin")
    # An 8-GPU host's RAM (2 TiB) for the resident modes' memory plan: the demo's host is pretend, not this one.
    ram = {"SPECDASH_SIM_HOST_RAM_MIB": str(2 * 1024 * 1024)}
    return {"PATH": f"{bin_dir}:{path}", DIR_ENV: str(base / "gpus"), COUNT_ENV: "8", **ram}


@dataclass
class Demo:
    """A running demo environment: the session to show, and what to remove if the process must die now."""

    session: RemoteSession
    """The session on the embedded SSH server (not running yet)."""
    paths: list[str]
    """Private temporary directories (keys, run records)."""

    def abandon(self) -> None:
        """For a hard exit (the terminal is gone): remove the private files. The simulator needs no help:
        it runs with `--sim-exit-with <our pid>` and follows us out."""
        for path in self.paths:
            shutil.rmtree(path, ignore_errors=True)


@contextlib.asynccontextmanager
async def demo_session(
    time_scale: float = TIME_SCALE, *, tour: bool = False, db: Path | None = None, name: str = "demo"
) -> AsyncIterator[Demo]:
    """An embedded SSH server and a `RemoteSession` on it (not running yet); `tour` shortens the levels;
    `name` names the host (`demo_host_name`: the dashboard's demo names its clock).

    On exit the demo's server is stopped (through the same lifecycle code), the SSH server closed, and the
    temporary run records removed: the demo leaves nothing running.
    """

    # Short levels keep the demo moving: 5 s each (3 s in the tour; steady state inside), 128-token responses.
    demo_sweep = SweepConfig(
        progress_interval_s=0.25,
        endpoint_follows_engine=True,
        duration_s=TOUR_LEVEL_S if tour else 5.0,
        settings=ProbeSettings(output_len=128),
    )
    state = tempfile.TemporaryDirectory(prefix="specdash-demo-runs-")
    server = EmbeddedSSHServer(gpu_host_env(Path(state.name)))
    endpoint = await server.start()
    ssh_config = Path(state.name) / "ssh_config"
    ssh_config.write_text("")  # the user's ~/.ssh/config has nothing to say about the demo host
    host_config = HostConfig(
        name=name,
        address=endpoint.target,
        identity_file=str(endpoint.client_key),
        known_hosts=str(endpoint.known_hosts),
        state_dir=str(Path(state.name) / "runs"),
    )
    options = SSHOptions(
        identity_files=(endpoint.client_key,),
        known_hosts=endpoint.known_hosts,
        ssh_config=ssh_config,
        use_agent=False,
    )
    cfg = demo_config(free_port(), time_scale)
    session = RemoteSession(
        SSHHost(endpoint.target, options),
        host_config,
        cfg,
        store=Store(db or demo_path()),
        sweep_defaults=demo_sweep,
        # The tour's A/B ends with a short greedy check (2 prompts: seconds, not the tour's minute).
        greedy_prompts=min(2, cfg.bench.greedy_prompts) if tour else cfg.bench.greedy_prompts,
    )
    try:
        yield Demo(session, [state.name, str(endpoint.client_key.parent)])
    finally:
        # Only the errors a stop over SSH can raise, so a bug still shows. If the stop fails anyway, the
        # simulator still ends: it runs with --sim-exit-with our PID.
        with contextlib.suppress(SpecdashError, OSError):
            async with SSHHost(endpoint.target, options) as host:
                lifecycle = Lifecycle(host, host_config)
                record = await lifecycle.current()
                if record is not None and record.alive:
                    await lifecycle.stop(record, grace=10)
                asleep = await run_script(host, "resident.sh", "list", state_dir=host_config.state_dir)
                for word, rest in asleep.lines:  # the resident modes' sleeping servers
                    if word == "asleep" and (run := await lifecycle.current(rest.split(" ", 1)[0])) is not None:
                        await lifecycle.stop(run, grace=10)
        await server.stop()
        state.cleanup()
