"""The simulator's GPUs, and a `nvidia-smi` that reports them, so the dashboard's GPU code runs unchanged.

Each TP rank process owns one pretend GPU (rank n is GPU n, or the n-th entry of `CUDA_VISIBLE_DEVICES`)
and writes what it holds as it starts: a few hundred MiB after dist init, the weights shard by shard,
the KV pool, the graphs; utilisation low while loading, high while capturing. Once serving, the main
process writes the load (running requests), which sets utilisation and power. A rank's file counts only
while the rank's process lives, so an orphaned rank holds its memory exactly as a real one does.

`python -m specdash.sim.gpus` (on PATH as `nvidia-smi` in the demo's host; elsewhere after
`python -m specdash.sim.gpus --install DIR`) answers the queries specdash and people make: `--query-gpu=...
--format=csv[,noheader][,nounits]`, `-L`, and the plain table. Files live in `SPECDASH_SIM_GPU_DIR`
(default: a per-user directory under the temporary directory); `SPECDASH_SIM_GPUS` sets how many GPUs the
host has (default 8).
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

DIR_ENV = "SPECDASH_SIM_GPU_DIR"
COUNT_ENV = "SPECDASH_SIM_GPUS"
DEFAULT_GPUS = 8
NAME = "NVIDIA H100 80GB HBM3"
TOTAL_MIB = 81_559
"""An H100 80GB's memory.total as nvidia-smi reports it."""
IDLE_W = 69.0
MAX_W = 700.0
"""An H100 SXM's idle draw and power limit."""
IDLE_MIB = 1
"""What an idle GPU reports as used."""


def state_dir() -> Path:
    """Where the simulator's processes leave their GPU state (shared by all simulators of this user)."""
    override = os.environ.get(DIR_ENV)
    if override:
        return Path(override)
    return Path(tempfile.gettempdir()) / f"specdash-sim-gpus-{os.getuid()}"


def gpu_index(rank: int) -> int:
    """The GPU a rank runs on: the rank-th of `CUDA_VISIBLE_DEVICES` when set, as CUDA numbers them."""
    visible = [part.strip() for part in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if part.strip()]
    if rank < len(visible) and visible[rank].isdigit():
        return int(visible[rank])
    return rank


@dataclass
class GpuState:
    """What one rank's GPU holds and does right now."""

    index: int
    mem_used_mib: float
    util_pct: float
    serving: bool = False
    """Started up: from now on the server's load (the main process's file) sets utilisation."""
    owner: int = 0
    """The server's main process, whose load file applies once serving."""
    mem_total_mib: float = TOTAL_MIB


def _write(path: Path, data: dict[str, object]) -> None:
    # Atomic: nvidia-smi may read while we write. Best effort: a full disk must not stop the simulator.
    with contextlib.suppress(OSError):
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(json.dumps(data))
        os.replace(tmp, path)


def write_gpu(state: GpuState) -> None:
    """A rank reports its GPU (one file per rank process)."""
    _write(state_dir() / f"gpu{state.index}-{os.getpid()}.json", asdict(state))


def write_load(running: int, max_running: int) -> None:
    """The main process reports its load: running requests out of the running cap."""
    _write(state_dir() / f"load-{os.getpid()}.json", {"running": running, "max_running": max(1, max_running)})


def write_sleep(held_mib: float | None) -> None:
    """The main process reports its memory released (each of its ranks' GPUs then shows `held_mib`), or
    resumed (None: the ranks' own figures apply again)."""
    path = state_dir() / f"sleep-{os.getpid()}.json"
    if held_mib is None:
        with contextlib.suppress(OSError):
            path.unlink()
        return
    _write(path, {"held_mib": held_mib})


def pid_alive(pid: int) -> bool:
    """Whether `pid` runs; a zombie counts as gone (a container's PID 1 may reap it only much later)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except (FileNotFoundError, ProcessLookupError):
        return False
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True


def _pid_of(path: Path) -> int | None:
    tail = path.stem.rsplit("-", 1)[-1]
    return int(tail) if tail.isdigit() else None


def _read(path: Path) -> dict[str, object] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def load_util(running: int, max_running: int) -> tuple[float, float]:
    """(utilisation %, fraction of the power range) for a server decoding `running` requests.

    nvidia-smi's utilisation is the share of time a kernel runs: any decode batch keeps it near 100 %,
    while the power drawn grows with the batch (more tokens per step).
    """
    if running <= 0:
        return 0.0, 0.0
    share = min(1.0, running / max_running)
    return min(100.0, 88.0 + 12.0 * share), min(1.0, 0.25 + 0.75 * share**0.5)


@dataclass(frozen=True)
class Reading:
    """One GPU as nvidia-smi reports it."""

    index: int
    util_pct: float
    mem_used_mib: float
    mem_total_mib: float
    power_w: float


def read_gpus(count: int | None = None) -> list[Reading]:
    """Every GPU of the host: idle unless a live rank holds it; files of dead processes are removed."""
    if count is None:
        raw = os.environ.get(COUNT_ENV, "")
        count = int(raw) if raw.isdigit() and int(raw) > 0 else DEFAULT_GPUS
    base = state_dir()
    loads: dict[int, tuple[float, float]] = {}
    asleep: dict[int, float] = {}
    held: dict[int, list[dict[str, object]]] = {}
    with contextlib.suppress(OSError):
        for path in base.glob("*.json"):
            pid = _pid_of(path)
            if pid is None or not pid_alive(pid):
                with contextlib.suppress(OSError):
                    path.unlink()
                continue
            data = _read(path)
            if data is None:
                continue
            if path.name.startswith("sleep-"):
                asleep[pid] = float(str(data.get("held_mib", 0.0)))
            elif path.name.startswith("load-"):
                loads[pid] = load_util(int(str(data.get("running", 0))), int(str(data.get("max_running", 1))))
            elif isinstance(data.get("index"), int):
                held.setdefault(int(str(data["index"])), []).append(data)
    readings = []
    for index in range(max(count, max(held, default=-1) + 1)):
        ranks = held.get(index, [])
        used = IDLE_MIB + sum(_held(r, asleep) for r in ranks)
        total = max((float(str(r.get("mem_total_mib", TOTAL_MIB))) for r in ranks), default=TOTAL_MIB)
        util, power = 0.0, 0.0
        for r in ranks:
            own = float(str(r.get("util_pct", 0.0)))
            served = loads.get(int(str(r.get("owner", 0))), (0.0, 0.0)) if r.get("serving") else (0.0, 0.0)
            util = max(util, own, served[0])
            power = max(power, own / 100 * 0.6, served[1])
        readings.append(Reading(index, util, min(used, total), total, IDLE_W + (MAX_W - IDLE_W) * power))
    return readings


def _held(rank: dict[str, object], asleep: dict[int, float]) -> float:
    """What a rank's GPU holds: its own figure, or what its server holds while its memory is released."""
    own = float(str(rank["mem_used_mib"]))
    owner = int(str(rank.get("owner", 0)))
    return min(own, asleep[owner]) if owner in asleep else own


# ------------------------------------------------------------------------------------------ nvidia-smi

_FIELDS = {
    "index": ("index", ""),
    "name": ("name", ""),
    "gpu_name": ("name", ""),
    "uuid": ("uuid", ""),
    "utilization.gpu": ("utilization.gpu [%]", "%"),
    "memory.used": ("memory.used [MiB]", "MiB"),
    "memory.total": ("memory.total [MiB]", "MiB"),
    "memory.free": ("memory.free [MiB]", "MiB"),
    "power.draw": ("power.draw [W]", "W"),
    "power.limit": ("power.limit [W]", "W"),
    "temperature.gpu": ("temperature.gpu", ""),
}
"""The fields this nvidia-smi answers: header text and unit (nvidia-smi's own spelling)."""


def _value(field: str, gpu: Reading) -> str:
    match field:
        case "index":
            return str(gpu.index)
        case "name" | "gpu_name":
            return NAME
        case "uuid":
            return f"GPU-5151{gpu.index:04d}-0000-4000-8000-specdashsim{gpu.index:02d}"
        case "utilization.gpu":
            return f"{gpu.util_pct:.0f}"
        case "memory.used":
            return f"{gpu.mem_used_mib:.0f}"
        case "memory.total":
            return f"{gpu.mem_total_mib:.0f}"
        case "memory.free":
            return f"{gpu.mem_total_mib - gpu.mem_used_mib:.0f}"
        case "power.draw":
            return f"{gpu.power_w:.2f}"
        case "power.limit":
            return f"{MAX_W:.2f}"
    return f"{30 + gpu.util_pct * 0.4:.0f}"  # temperature.gpu


def query(fields: list[str], fmt: set[str], gpus: list[Reading]) -> str:
    """`--query-gpu=FIELDS --format=FMT` output, as nvidia-smi prints it (`, `-separated CSV)."""
    lines = []
    if "noheader" not in fmt:
        lines.append(", ".join(_FIELDS[f][0] if "nounits" not in fmt else f for f in fields))
    for gpu in gpus:
        cells = []
        for f in fields:
            unit = _FIELDS[f][1]
            value = _value(f, gpu)
            cells.append(value if "nounits" in fmt or not unit else f"{value} {unit}")
        lines.append(", ".join(cells))
    return "\n".join(lines) + "\n"


def table(gpus: list[Reading]) -> str:
    """The plain `nvidia-smi` view, abridged to its GPU rows."""
    rows = [
        "+-----------------------------------------------------------------------------------------+",
        "| NVIDIA-SMI 570.00 (specdash sim)      Driver Version: 570.00         CUDA Version: 12.8  |",
        "|  GPU  Name                          Util        Memory-Usage              Pwr:Usage/Cap  |",
        "|=========================================================================================|",
    ]
    for gpu in gpus:
        memory = f"{gpu.mem_used_mib:.0f}MiB / {gpu.mem_total_mib:.0f}MiB"
        power = f"{gpu.power_w:.0f}W / {MAX_W:.0f}W"
        rows.append(f"|  {gpu.index:>3}  {NAME:<28}  {gpu.util_pct:>3.0f}%  {memory:>24}  {power:>20}  |")
    rows.append(rows[0])
    return "\n".join(rows) + "\n"


def main(argv: list[str]) -> int:
    """nvidia-smi's command line, for the queries above; anything else gets nvidia-smi's own complaint.

    `--install DIR` (ours, not nvidia-smi's) writes the `nvidia-smi` script into DIR instead.
    """
    if argv[:1] == ["--install"] and len(argv) == 2:
        try:
            print(f"installed {install(Path(argv[1]).expanduser())}")
        except OSError as exc:
            sys.stderr.write(f"cannot install nvidia-smi into {argv[1]}: {exc.strerror}\n")
            return 1
        return 0
    fields: list[str] | None = None
    fmt: set[str] = set()
    listing = False
    for arg in argv:
        if arg.startswith("--query-gpu="):
            fields = [f.strip() for f in arg.split("=", 1)[1].split(",") if f.strip()]
        elif arg.startswith("--format="):
            fmt = {f.strip() for f in arg.split("=", 1)[1].split(",")}
        elif arg in ("-L", "--list-gpus"):
            listing = True
        else:
            sys.stderr.write(f'Invalid combination of input arguments: "{arg}" is not supported by this simulator.\n')
            return 2
    gpus = read_gpus()
    if listing:
        sys.stdout.write("".join(f"GPU {g.index}: {NAME} (UUID: {_value('uuid', g)})\n" for g in gpus))
        return 0
    if fields is None:
        sys.stdout.write(table(gpus))
        return 0
    unknown = [f for f in fields if f not in _FIELDS]
    if unknown:
        sys.stdout.write(f'Field "{unknown[0]}" is not a valid field to query.\n\n')
        return 2
    if "csv" not in fmt:
        sys.stdout.write('"--format" must be specified with "--query-gpu" (csv).\n')
        return 2
    sys.stdout.write(query(fields, fmt, gpus))
    return 0


def install(directory: Path) -> Path:
    """Write an executable `nvidia-smi` into `directory` that runs this module with this Python."""
    directory.mkdir(parents=True, exist_ok=True)
    script = directory / "nvidia-smi"
    script.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m specdash.sim.gpus "$@"\n')
    script.chmod(0o755)
    return script


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
