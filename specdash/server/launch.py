"""The command line that starts a mode's server, as a list of literal arguments, built from the mode's config
and what its engine is (`engines.<engine>`: launch module, model flag, launch environment).

`python -m MODULE MODEL_FLAG M --host 127.0.0.1 --port P ARGS...`, e.g. SGLang's
`python -m sglang.launch_server --model-path M ...`. A mode's `launcher` replaces the part before the flags,
so `["specdash", "sim"]` runs the simulator with SGLang's own flags.

Servers bind 127.0.0.1 only: specdash reaches them through the SSH port forward.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import replace

from specdash.config import HostConfig, ModeConfig
from specdash.engines.registry import get
from specdash.engines.residency import resident_args

# Launch environment every engine gets: SGLang's warmup honours proxies (sglang#2468), vLLM colours its
# prefixes on a TTY, output is not held back in buffers (the log is how we watch the start).
BASE_ENV: Mapping[str, str] = {
    "no_proxy": "127.0.0.1,localhost",
    "NO_PROXY": "127.0.0.1,localhost",
    "NO_COLOR": "1",
    "PYTHONUNBUFFERED": "1",
}


def launch_argv(mode: ModeConfig, host: HostConfig) -> list[str]:
    """The argv that starts `mode` on `host`."""
    engine = get(mode.engine)
    launcher = list(mode.launcher) or [host.python, "-m", engine.launch_module]
    args = mode.args
    if mode.resident and engine.residency is not None:
        args = resident_args(engine.residency, args)  # the flags that let it sleep, unless given
    return [
        *launcher,
        engine.model_flag,
        mode.model,
        "--host",
        "127.0.0.1",
        "--port",
        str(mode.port),
        *args,
    ]


def launch_env(mode: ModeConfig, host: HostConfig) -> dict[str, str]:
    """The environment added to the remote shell's for the launch (mode over host over defaults)."""
    engine = get(mode.engine)
    sleep_env = engine.residency.env if mode.resident and engine.residency is not None else {}
    return {**BASE_ENV, **engine.launch_env, **sleep_env, **host.env, **mode.env}


def paste_command(mode: ModeConfig, host: HostConfig, args: Sequence[str]) -> str:
    """The launch of `mode` with `args` in place of its own, as a command line a user can paste (env first)."""
    run = replace(mode, args=tuple(args))
    env = [f"{k}={shlex.quote(v)}" for k, v in launch_env(run, host).items()]
    return " ".join([*env, shlex.join(launch_argv(run, host))])
