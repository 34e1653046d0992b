"""The user's configuration: hosts and server modes, read from TOML and validated strictly.

Who reads which file:

| file | read by | override |
|---|---|---|
| `user_config_path("specdash")/config.toml` | every command | `--config PATH`, `SPECDASH_CONFIG` |
| `~/.ssh/config`, `~/.ssh/known_hosts` | the SSH layer (asyncssh) | a host's `ssh_config` / `known_hosts` keys |

The known engine names come from the caller (`engines.registry.names()`: the config sits below the
engines and does not list them). Every error names the file, the table and the key, and is a `UsageError`
(exit 2). A mode may `extends` another: arguments are appended to the parent's, `env` tables are merged,
other keys override.
Values are kept as lists of literal arguments; they are quoted with `shlex` only when a command line is
built, so `;` or `$(...)` in a value reaches the engine as text, never as shell.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specdash.errors import UsageError, did_you_mean
from specdash.limits import MAX_CONFIG_BYTES, MAX_EXTENDS_DEPTH, MAX_GRACE_S, read_regular_file
from specdash.phases import STARTUP_ORDER, Phase
from specdash.slo import SloError, parse_slo
from specdash.target import parse_target

# The stuck-phase rules a mode may set; `core.stuck` applies them (its docstring states the rules).
HISTORY_FACTOR = 3.0
"""The history rule's multiple of the slowest recorded duration."""
HISTORY_FLOOR_S = 120.0
"""The history rule's lowest limit: a phase that once took 2 s may still pause for a minute."""


@dataclass(frozen=True)
class StuckPolicy:
    """A mode's stuck rules, `[modes.NAME.stuck]`."""

    factor: float = HISTORY_FACTOR
    """The limit from history is this many times the slowest recorded duration of the phase."""
    floor: float = HISTORY_FLOOR_S
    """The limit from history is never below this many seconds."""
    fixed: Mapping[Phase, float] = field(default_factory=dict)
    """Phases with a fixed limit in seconds, history or not."""


def phase_named(name: str) -> Phase | None:
    """The startup phase a config key names: `capturing CUDA graphs`, `capturing-cuda-graphs`, `dist_init`."""
    wanted = name.strip().lower().replace("_", " ").replace("-", " ")
    for phase in STARTUP_ORDER:
        if phase.value.lower().replace("-", " ") == wanted and phase is not Phase.READY:
            return phase
    return None


@dataclass(frozen=True)
class HostConfig:
    """One remote machine, as named in `[hosts.NAME]`."""

    name: str
    """The table name, used on the command line (`specdash up NAME`)."""
    address: str
    """`[user@]host[:port]` or an alias from `~/.ssh/config`."""
    jump: str | None = None
    """A jump host (`ProxyJump`), `[user@]host[:port]`."""
    identity_file: str | None = None
    """A private key to offer, like `ssh -i`."""
    known_hosts: str | None = None
    """A known_hosts file to verify the host key against (default: `~/.ssh/known_hosts`)."""
    workdir: str = "~"
    """The directory the server is launched from."""
    python: str = "python3"
    """The remote Python that runs the engine (`python -m sglang.launch_server`)."""
    state_dir: str = "~/.specdash"
    """Where run records live on the host (one per user by default; set one per person on a shared account)."""
    env: Mapping[str, str] = field(default_factory=dict)
    """Environment for every launch on this host (merged under the mode's `env`); on a Slurm host also for
    every Slurm command specdash runs on the login node (`SLURM_CONF`, a module's `PATH`)."""
    slurm: SlurmConfig | None = None
    """`scheduler = "slurm"`: the host is a login node and modes start as batch jobs (`[hosts.NAME.slurm]`)."""


SCHEDULERS = ("ssh", "slurm")
"""`[hosts.NAME] scheduler`: `ssh` runs the server as a process on the host itself, `slurm` submits it."""


@dataclass(frozen=True)
class SlurmConfig:
    """How a mode's batch job is asked for, `[hosts.NAME.slurm]` (every key optional)."""

    partition: str = ""
    """`#SBATCH --partition` (empty: the cluster's default)."""
    nodes: int = 1
    """Nodes per job: one `srun` step per node launches the engine with its multi-node flags."""
    gpus_per_node: int = 0
    """`#SBATCH --gpus-per-node` (0: not asked for)."""
    time_limit: str = ""
    """`#SBATCH --time` in Slurm's words (`04:00:00`, `1-00:00:00`); empty: the partition's default."""
    account: str = ""
    """`#SBATCH --account` (empty: the user's default)."""
    sbatch: tuple[str, ...] = ()
    """Extra `#SBATCH` options, one per item without the prefix (`--qos=high`, `--exclusive`)."""
    dist_port: int = 29500
    """The head node's port for the engines' rendezvous (`--dist-init-addr HEAD:PORT`, `--master-port`)."""
    output_dir: str = "~/.specdash/slurm"
    """A directory on the shared filesystem for the job scripts and their output (one per run)."""


@dataclass(frozen=True)
class ModeConfig:
    """A way to run a server: an engine, a model and arguments, as named in `[modes.NAME]`."""

    name: str
    """The table name (`specdash switch HOST NAME`)."""
    engine: str
    """`sglang` or `vllm`."""
    model: str
    """The model path or id (`--model-path` for SGLang, `--model` for vLLM)."""
    port: int = 30000
    """The HTTP port the server listens on (on the remote host's loopback)."""
    args: tuple[str, ...] = ()
    """Extra engine arguments, each a literal argument."""
    env: Mapping[str, str] = field(default_factory=dict)
    """Environment variables for the launch (e.g. `SGLANG_ENABLE_SPEC_V2=1`)."""
    launcher: tuple[str, ...] = ()
    """Replaces the engine's launcher (e.g. `["specdash", "sim"]` for the simulator)."""
    description: str = ""
    """One line shown in the mode list."""
    stop_timeout: float = 30.0
    """Seconds to wait after SIGTERM before SIGKILL of the process group."""
    stuck: StuckPolicy = field(default_factory=StuckPolicy)
    """When a startup phase counts as stuck, `[modes.NAME.stuck]`: `factor` x the slowest recorded
    duration of the phase for this mode and host, at least `floor` seconds; or a fixed limit per phase."""
    resident: bool = False
    """Keep the server between switches, asleep with its GPU memory released, instead of stopping it
    (`docs/resident.md`); the engine's sleep flags are added at launch. Not inherited by `extends`."""
    sleep_level: int = 1
    """The engine's sleep level for a resident mode: 1 keeps the weights in host RAM (the only level for a
    speculative mode), 2 discards them."""


@dataclass(frozen=True)
class UIConfig:
    """Dashboard preferences, `[ui]`."""

    bell: bool = True
    """Ring the terminal bell on ready, crash and sweep done."""
    theme: str = "textual-dark"
    """A Textual theme name."""


LINK_LOSS_POLICIES = ("pause", "stop")
"""What a sweep does when the SSH link drops (`[bench] on_link_loss`, `bench --on-link-loss`)."""
PROBE_PLACES = ("host", "local")
"""Where a sweep's probe runs (`[bench] probe`, `bench --probe`): next to the server, or here."""


@dataclass(frozen=True)
class BenchConfig:
    """Sweep preferences, `[bench]` (the `bench` command's flags override them)."""

    on_link_loss: str = "pause"
    """When the SSH link drops mid-sweep: `pause` (wait, then run the interrupted level again) or `stop`."""
    link_wait: float = 600.0
    """Seconds a paused sweep waits for the link before it stops."""
    probe: str = "host"
    """`host`: the probe runs on the server's host (only records cross the link; falls back to `local`, with a
    warning in the run's record, when the host has no Python >= 3.9); `local`: here, through the forward."""
    slo: str = ""
    """An SLO every sweep is judged against, e.g. `ttft_p90=500ms,tpot_p90=50ms` (`--slo` overrides)."""
    greedy_prompts: int = 8
    """Prompts in the dashboard's greedy spot check (and the one after each mode of an A/B); 0: no check
    after an A/B."""


@dataclass(frozen=True)
class TuneConfig:
    """A speculation tune, `[tune.NAME]` (`specdash tune HOST --tune NAME`; flags override)."""

    name: str
    """The table name (also the tune's journal name unless `--name` is given)."""
    mode: str
    """The speculative mode whose draft settings are tuned."""
    space: str
    """The settings to try, as `--space` takes them."""
    baseline: str = "baseline"
    """The reference mode."""
    levels: str = ""
    """Concurrency levels, as `--levels` takes them (empty: the command's default)."""
    repeats: int = 0
    """Passes (0: the command's default)."""


@dataclass(frozen=True)
class Config:
    """The whole validated configuration."""

    path: Path | None
    """Where it was read from (None for built-in configs such as the demo's)."""
    hosts: Mapping[str, HostConfig]
    """Hosts by name."""
    modes: Mapping[str, ModeConfig]
    """Modes by name, with `extends` already resolved."""
    ui: UIConfig = field(default_factory=UIConfig)
    """Dashboard preferences."""
    bench: BenchConfig = field(default_factory=BenchConfig)
    """Sweep preferences."""
    keymap: Mapping[str, str] = field(default_factory=dict)
    """Binding id -> key(s), applied with `App.set_keymap`."""
    tunes: Mapping[str, TuneConfig] = field(default_factory=dict)
    """Speculation tunes by name (`[tune.NAME]`)."""
    fleets: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Host lists by name (`[fleet.NAME] hosts = [...]`): `specdash connect NAME` opens them all in the fleet view."""
    found: bool = True
    """False when no file was at `path` (an empty config; messages then say how to write one)."""

    def mode(self, name: str) -> ModeConfig:
        """The mode called `name`, or a UsageError that lists the known ones."""
        try:
            return self.modes[name]
        except KeyError:
            if not self.found:
                raise UsageError(
                    f"unknown mode {name!r}: there is no config file at {self.path} "
                    "(run `specdash config init` to write an example, then add your modes)"
                ) from None
            known = ", ".join(sorted(self.modes)) or "none"
            hint = did_you_mean(name, self.modes)
            raise UsageError(f"unknown mode {name!r} in {self._where()}{hint} (known modes: {known})") from None

    def _where(self) -> str:
        return str(self.path) if self.path else "the built-in config"


# ---------------------------------------------------------------------------------------------- reading


class _Table:
    """A TOML table being validated: every access names file, table and key in its errors."""

    def __init__(self, path: Path, name: str, data: Any) -> None:
        if not isinstance(data, dict):
            raise UsageError(f"{path}: [{name}] must be a table, not {_kind(data)}")
        self.path, self.name, self.data = path, name, data

    def error(self, key: str, problem: str) -> UsageError:
        return UsageError(f"{self.path}: [{self.name}] {key}: {problem}")

    def check_keys(self, allowed: set[str]) -> None:
        for key in self.data:
            if key not in allowed:
                raise self.error(key, f"unknown key (expected one of: {', '.join(sorted(allowed))})")

    def string(self, key: str, default: str | None = None, *, required: bool = False) -> str | None:
        value = self.data.get(key, default)
        if value is None:
            if required:
                raise self.error(key, "missing (required)")
            return None
        if not isinstance(value, str):
            raise self.error(key, f"must be a string, not {_kind(value)}")
        if required and not value.strip():
            raise self.error(key, "must not be empty")
        return value

    def strings(self, key: str) -> tuple[str, ...]:
        value = self.data.get(key, [])
        if isinstance(value, str):
            raise self.error(key, 'must be a list of strings, e.g. ["--tp", "8"]')
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self.error(key, f"must be a list of strings, not {_kind(value)}")
        if any("\0" in v for v in value):
            raise self.error(key, "contains a NUL character (no program can receive it)")
        return tuple(value)

    def mapping(self, key: str) -> dict[str, str]:
        value = self.data.get(key, {})
        if not isinstance(value, dict):
            raise self.error(key, f"must be a table of strings, not {_kind(value)}")
        for k, v in value.items():
            if not isinstance(v, str):
                raise self.error(f"{key}.{k}", f"must be a string, not {_kind(v)}")
            if not _ENV_NAME.fullmatch(k):
                raise self.error(f"{key}.{k}", "not a valid environment variable name (letters, digits, _)")
            if "\0" in v:
                raise self.error(f"{key}.{k}", "contains a NUL character")
        return dict(value)

    def number(self, key: str, default: float, *, low: float, high: float) -> float:
        value = self.data.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.error(key, f"must be a number, not {_kind(value)}")
        if not low <= value <= high:
            raise self.error(key, f"{value} is out of range ({low:g} to {high:g})")
        return float(value)

    def boolean(self, key: str, default: bool) -> bool:
        value = self.data.get(key, default)
        if not isinstance(value, bool):
            raise self.error(key, f"must be true or false, not {_kind(value)}")
        return value


def _kind(value: Any) -> str:
    names = {dict: "a table", list: "a list", str: "a string", bool: "a boolean", int: "an integer"}
    return names.get(type(value), type(value).__name__)


_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_HOST_KEYS = {
    "address",
    "jump",
    "identity_file",
    "known_hosts",
    "workdir",
    "python",
    "state_dir",
    "env",
    "scheduler",
    "slurm",
}
_SLURM_KEYS = {"partition", "nodes", "gpus_per_node", "time_limit", "account", "sbatch", "dist_port", "output_dir"}
_SLURM_TIME = re.compile(r"\d+-\d+(:\d{1,2}){0,2}|\d+(:\d{1,2}){0,2}|UNLIMITED|INFINITE", re.I)
_SLURM_WORD = re.compile(r"[A-Za-z0-9_.+-]*")
_MODE_KEYS = {
    "extends",
    "engine",
    "model",
    "port",
    "args",
    "env",
    "launcher",
    "description",
    "stop_timeout",
    "stuck",
    "resident",
    "sleep_level",
}
_TOP_KEYS = {"hosts", "modes", "ui", "bench", "keymap", "tune", "fleet"}


ResidencyCheck = Callable[[str, tuple[str, ...], int], "str | None"]
"""(engine, args, sleep level) -> why such a mode cannot be resident, or None (`engines.residency.refusal`,
through the caller: the config sits below the engines)."""


def load(path: Path | None = None, *, engines: Collection[str], residency: ResidencyCheck | None = None) -> Config:
    """Read and validate the config file. A missing file gives an empty config (no hosts, no modes).

    Args:
        path: The file (default: `paths.config_file()`).
        engines: The engine names a mode may use (`engines.registry.names()`).
        residency: Refuses a `resident = true` mode its engine cannot keep asleep (with the reason).
    """
    from specdash import paths

    path = path or paths.config_file()
    try:
        # utf-8-sig: a byte-order mark (Windows editors write one) is no TOML syntax error at line 1.
        text = read_regular_file(path, MAX_CONFIG_BYTES, "config").decode("utf-8-sig")
    except FileNotFoundError:
        return Config(path=path, hosts={}, modes={}, found=False)
    except UnicodeDecodeError as exc:
        raise UsageError(f"cannot read config {path}: {exc}") from None
    return parse(text, path, engines=engines, residency=residency)


def parse(text: str, path: Path, *, engines: Collection[str], residency: ResidencyCheck | None = None) -> Config:
    """Validate a config's TOML text; `path` is used in messages, `engines` are the known engine names."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{path}: TOML syntax error: {exc}") from None
    except RecursionError:
        raise UsageError(f"{path}: TOML nested too deeply") from None
    for key in data:
        if key not in _TOP_KEYS:
            raise UsageError(f"{path}: unknown top-level key {key!r} (expected one of: {', '.join(sorted(_TOP_KEYS))})")
    hosts = {name: _host(_Table(path, f"hosts.{name}", t), name) for name, t in _subtables(path, data, "hosts")}
    raw_modes = dict(_subtables(path, data, "modes"))
    modes = _modes(path, raw_modes, tuple(engines))
    _check_resident(path, modes, residency)
    ui_table = _Table(path, "ui", data.get("ui", {}))
    ui_table.check_keys({"bell", "theme"})
    ui = UIConfig(bell=ui_table.boolean("bell", True), theme=ui_table.string("theme", "textual-dark") or "")
    bench_table = _Table(path, "bench", data.get("bench", {}))
    bench_table.check_keys({"on_link_loss", "link_wait", "probe", "slo", "greedy_prompts"})
    on_link_loss = bench_table.string("on_link_loss", "pause") or ""
    if on_link_loss not in LINK_LOSS_POLICIES:
        raise bench_table.error("on_link_loss", f"must be one of {', '.join(LINK_LOSS_POLICIES)}, not {on_link_loss!r}")
    probe = bench_table.string("probe", "host") or ""
    if probe not in PROBE_PLACES:
        raise bench_table.error("probe", f"must be one of {', '.join(PROBE_PLACES)}, not {probe!r}")
    slo = bench_table.string("slo", "") or ""
    if slo:
        try:
            parse_slo(slo)
        except SloError as exc:
            raise bench_table.error("slo", str(exc)) from None
    greedy = bench_table.number("greedy_prompts", 8, low=0, high=1000)
    if greedy != int(greedy):
        raise bench_table.error("greedy_prompts", f"must be a whole number of prompts, not {greedy:g}")
    link_wait = bench_table.number("link_wait", 600.0, low=1.0, high=7 * 86400.0)
    bench = BenchConfig(on_link_loss, link_wait, probe, slo, int(greedy))
    tunes = {name: _tune(_Table(path, f"tune.{name}", t), name, modes) for name, t in _subtables(path, data, "tune")}
    fleets = {name: _fleet(_Table(path, f"fleet.{name}", t)) for name, t in _subtables(path, data, "fleet")}
    return Config(
        path=path, hosts=hosts, modes=modes, ui=ui, bench=bench, keymap=_keymap(path, data), tunes=tunes, fleets=fleets
    )


def _fleet(t: _Table) -> tuple[str, ...]:
    t.check_keys({"hosts"})
    hosts = t.strings("hosts")
    if not hosts or any(not h.strip() for h in hosts):
        raise t.error("hosts", 'must list at least one host, e.g. ["gpu-a", "gpu-b"]')
    return hosts


def _tune(t: _Table, name: str, modes: Mapping[str, ModeConfig]) -> TuneConfig:
    t.check_keys({"mode", "space", "baseline", "levels", "repeats"})
    mode = t.string("mode", required=True) or ""
    baseline = t.string("baseline", "baseline") or ""
    for key, value in (("mode", mode), ("baseline", baseline)):
        if value not in modes:
            raise t.error(key, f"no mode named {value!r} (known modes: {', '.join(sorted(modes)) or 'none'})")
    repeats = t.number("repeats", 0, low=0, high=10)
    if not repeats.is_integer():
        raise t.error("repeats", f"must be a whole number, not {repeats}")
    return TuneConfig(
        name=name,
        mode=mode,
        space=t.string("space", required=True) or "",
        baseline=baseline,
        levels=t.string("levels", "") or "",
        repeats=int(repeats),
    )


def _keymap(path: Path, data: dict[str, Any]) -> dict[str, str]:
    table = _Table(path, "keymap", data.get("keymap", {}))
    return {k: v for k, v in table.data.items() if _is_str(table, k, v)}


def _is_str(table: _Table, key: str, value: Any) -> bool:
    if not isinstance(value, str):
        raise table.error(key, f'must be a string of keys, e.g. "ctrl+s", not {_kind(value)}')
    return True


def _subtables(path: Path, data: dict[str, Any], key: str) -> list[tuple[str, Any]]:
    section = data.get(key, {})
    if not isinstance(section, dict):
        raise UsageError(f"{path}: [{key}] must be a table of tables, not {_kind(section)}")
    return list(section.items())


def _host(t: _Table, name: str) -> HostConfig:
    t.check_keys(_HOST_KEYS)
    address = t.string("address", required=True) or ""
    try:
        parse_target(address)  # a bad host string fails here, naming the file, not at the first connect
    except UsageError as exc:
        raise t.error("address", exc.message) from None
    jump = t.string("jump")
    for hop in (jump or "").split(",") if jump is not None else ():
        try:
            parse_target(hop)  # what connecting would refuse, refused here
        except UsageError as exc:
            raise t.error("jump", exc.message) from None
    return HostConfig(
        name=name,
        address=address,
        jump=jump,
        identity_file=t.string("identity_file"),
        known_hosts=t.string("known_hosts"),
        workdir=t.string("workdir", "~") or "~",
        python=t.string("python", "python3") or "python3",
        state_dir=t.string("state_dir", "~/.specdash") or "~/.specdash",
        env=t.mapping("env"),
        slurm=_slurm(t),
    )


def _slurm(host: _Table) -> SlurmConfig | None:
    scheduler = host.string("scheduler", "ssh") or "ssh"
    if scheduler not in SCHEDULERS:
        raise host.error("scheduler", f"{scheduler!r} is not one of {', '.join(SCHEDULERS)}")
    if scheduler != "slurm":
        if "slurm" in host.data:
            raise host.error("slurm", 'a [slurm] table needs scheduler = "slurm" on the host')
        return None
    t = _Table(host.path, f"{host.name}.slurm", host.data.get("slurm", {}))
    t.check_keys(_SLURM_KEYS)
    words = {}
    for key in ("partition", "account"):
        value = t.string(key, "") or ""
        if not _SLURM_WORD.fullmatch(value):
            raise t.error(key, f"{value!r} is not a Slurm name (letters, digits, . _ + -)")
        words[key] = value
    time_limit = t.string("time_limit", "") or ""
    if time_limit and not _SLURM_TIME.fullmatch(time_limit):
        raise t.error("time_limit", f"{time_limit!r} is not a Slurm time (MM, HH:MM:SS, D-HH:MM:SS)")
    extra = t.strings("sbatch")
    for line in extra:
        if not line.startswith("-") or "\n" in line or "\r" in line:
            raise t.error("sbatch", f"{line!r}: one sbatch option per item, starting with '-' (no line breaks)")
    nodes = t.number("nodes", 1, low=1, high=1024)
    gpus = t.number("gpus_per_node", 0, low=0, high=64)
    dist_port = t.number("dist_port", 29500, low=1, high=65535)
    for key, number in (("nodes", nodes), ("gpus_per_node", gpus), ("dist_port", dist_port)):
        if not number.is_integer():
            raise t.error(key, f"must be a whole number, not {number}")
    return SlurmConfig(
        partition=words["partition"],
        nodes=int(nodes),
        gpus_per_node=int(gpus),
        time_limit=time_limit,
        account=words["account"],
        sbatch=extra,
        dist_port=int(dist_port),
        output_dir=t.string("output_dir", "~/.specdash/slurm") or "~/.specdash/slurm",
    )


def _port(t: _Table, default: int) -> int:
    value = t.number("port", default, low=1, high=65535)
    if not value.is_integer():
        raise t.error("port", f"must be a whole number, not {value}")
    return int(value)


def _modes(path: Path, raw: dict[str, Any], engines: tuple[str, ...]) -> dict[str, ModeConfig]:
    """Every mode with its `extends` chain resolved: each mode once (a chain's parents are kept, not rebuilt
    for each child), iteratively, and no deeper than `MAX_EXTENDS_DEPTH` (checked while walking up, before
    any mode of the chain is built): linear in the number of modes, whatever their chains."""
    done: dict[str, ModeConfig] = {}
    depth: dict[str, int] = {}
    for name in raw:
        chain: list[str] = []
        on_chain: set[str] = set()
        current: str | None = name
        while current is not None and current not in done:
            if current in on_chain:
                cycle = " -> ".join((*chain, current))
                raise UsageError(f"{path}: [modes.{chain[-1]}] extends: cycle {cycle}")
            chain.append(current)
            on_chain.add(current)
            t = _Table(path, f"modes.{current}", raw[current])
            parent_name = t.string("extends")
            if parent_name is not None and parent_name not in raw:
                known = sorted(raw)
                shown = ", ".join(known[:20]) + (f", ... ({len(known)} in all)" if len(known) > 20 else "")
                raise t.error("extends", f"no mode named {parent_name!r} (known modes: {shown})")
            reach = len(chain) + (depth[parent_name] if parent_name in depth else 0)
            if reach > MAX_EXTENDS_DEPTH:
                raise t.error("extends", f"chain deeper than {MAX_EXTENDS_DEPTH} modes (from [modes.{name}])")
            current = parent_name
        for mode_name in reversed(chain):
            parent_name = _Table(path, f"modes.{mode_name}", raw[mode_name]).string("extends")
            parent = done[parent_name] if parent_name is not None else None
            done[mode_name] = _mode(path, mode_name, raw[mode_name], parent, engines)
            depth[mode_name] = 1 + (depth[parent_name] if parent_name is not None else 0)
    return done


def _mode(path: Path, name: str, raw: Any, parent: ModeConfig | None, engines: tuple[str, ...]) -> ModeConfig:
    """One mode's table over its (already resolved) parent."""
    t = _Table(path, f"modes.{name}", raw)
    t.check_keys(_MODE_KEYS)
    engine = t.string("engine", parent.engine if parent else None, required=True) or ""
    if engine not in engines:
        raise t.error("engine", f"{engine!r} is not one of {', '.join(engines)}")
    model = t.string("model", parent.model if parent else None, required=True) or ""
    args = t.strings("args")
    for arg in args:
        if not arg:
            raise t.error("args", "contains an empty argument")
    launcher = t.strings("launcher")
    if "launcher" in t.data and (not launcher or not launcher[0].strip()):
        raise t.error("launcher", "must name a program (leave the key out for the engine's default)")
    return ModeConfig(
        name=name,
        engine=engine,
        model=model,
        port=_port(t, parent.port if parent else 30000),
        args=(parent.args if parent else ()) + args,
        env={**(parent.env if parent else {}), **t.mapping("env")},
        launcher=launcher or (parent.launcher if parent else ()),
        description=t.string("description", parent.description if parent else "") or "",
        stop_timeout=t.number("stop_timeout", parent.stop_timeout if parent else 30.0, low=0, high=MAX_GRACE_S),
        stuck=_stuck(_Table(path, f"modes.{name}.stuck", t.data.get("stuck", {})), parent.stuck if parent else None),
        resident=t.boolean("resident", False),  # not inherited: a resident server needs a port of its own
        sleep_level=_sleep_level(t, parent.sleep_level if parent else 1),
    )


def _sleep_level(t: _Table, default: int) -> int:
    value = t.number("sleep_level", default, low=1, high=2)
    if not value.is_integer():
        raise t.error("sleep_level", f"must be 1 or 2, not {value}")
    return int(value)


def _check_resident(path: Path, modes: Mapping[str, ModeConfig], residency: ResidencyCheck | None) -> None:
    """A resident mode must be one its engine can put to sleep, and its server must be able to sleep beside
    any other mode's: its port is its own."""
    for mode in modes.values():
        if not mode.resident:
            continue
        why = residency(mode.engine, mode.args, mode.sleep_level) if residency is not None else None
        if why is not None:
            raise UsageError(f"{path}: [modes.{mode.name}] resident: refused: {why}")
        for other in modes.values():
            if other.name != mode.name and other.port == mode.port:
                raise UsageError(
                    f"{path}: [modes.{mode.name}] port: {mode.port} is also [modes.{other.name}]'s; a resident "
                    "mode's server stays up beside the others, so it needs a port of its own"
                )


def _stuck(t: _Table, parent: StuckPolicy | None) -> StuckPolicy:
    base = parent or StuckPolicy()
    fixed = dict(base.fixed)
    for key in t.data:
        if key in ("factor", "floor"):
            continue
        phase = phase_named(key)
        if phase is None:
            names = ", ".join(f'"{p.value}"' for p in STARTUP_ORDER if p is not Phase.READY)
            raise t.error(key, f"neither factor, floor nor a startup phase ({names})")
        fixed[phase] = t.number(key, 0.0, low=1.0, high=7 * 86400.0)
    return StuckPolicy(
        factor=t.number("factor", base.factor, low=1.0, high=100.0),
        floor=t.number("floor", base.floor, low=1.0, high=7 * 86400.0),
        fixed=fixed,
    )
