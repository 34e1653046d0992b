"""Resident modes on a host: put a server to sleep, find the sleeping ones, wake one and verify it.

A sleep (`sleep`): take the mode's greedy reference outputs first if the store has none for this host (the
prompts of the greedy check), with the accept length they show; ask the engine to sleep
(`engines.residency`); wait until `nvidia-smi` shows each GPU released (`core.resident.released`, with a
deadline); record on the host what it held awake and asleep (`scripts/resident.sh`). A wake (`wake`): check
the GPUs have room, ask the engine to wake (with a deadline), wait until it says it is awake (`/is_sleeping`
where the engine has one: vLLM's `/health` is 200 while asleep) and healthy, then verify: greedy outputs
identical to the stored reference, and the accept length within `core.resident.ACCEPT_TOLERANCE` of the
figure before the sleep. Any failure raises `NotResident` with one line of evidence; the caller
(`RemoteSession.switch`) then stops that server and restarts the mode. Only runs recorded by specdash are
ever signalled (`Lifecycle.stop`).
"""

from __future__ import annotations

import asyncio
import json
import shlex
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

import httpx

from specdash.bench.greedy import chosen_prompts, greedy_outputs, workload_key
from specdash.bench.prompts import load_prompts
from specdash.bench.server_view import level_view, parse_prometheus
from specdash.bench.store import Store
from specdash.bench.sweep import SweepConfig
from specdash.config import Config, HostConfig, ModeConfig
from specdash.core.events import GpuSample
from specdash.core.greedy import compare_outputs
from specdash.core.resident import MemoryPlan, ServerNeed, check_accept, mean, plan_memory, released, weights_mib
from specdash.engines.registry import get
from specdash.engines.residency import HttpCall, Residency, is_speculative
from specdash.errors import SpecdashError
from specdash.remote.ssh import SSHHost
from specdash.safetext import escape_controls
from specdash.server.gpu import QUERY, parse_gpus
from specdash.server.lifecycle import Lifecycle, RunRecord, run_framed, run_script


class ResidentSession(Protocol):
    """What these functions use of the session (`server.remote_session.RemoteSession`, which calls them)."""

    host: SSHHost
    host_config: HostConfig
    config: Config
    lifecycle: Lifecycle
    store: Store | None
    sweep_defaults: SweepConfig
    greedy_prompts: int
    accept_by_run: dict[str, float | None]

    @property
    def label(self) -> str: ...


SLEEP_TIMEOUT_S = 120.0
"""How long the sleep request may take (a level-1 sleep copies the weights to host RAM)."""
RELEASE_TIMEOUT_S = 60.0
"""After the sleep answered, how long the GPUs may take to show the memory released."""
WAKE_TIMEOUT_S = 120.0
"""How long the wake request may take (the weights back over the host-device link)."""
HEALTH_TIMEOUT_S = 60.0
"""After the wake answered, how long the server may take to say it is awake and healthy."""
VERIFY_TOKENS = 32
"""Tokens per prompt of the wake check: a wrong weight shows in the first few; the check costs seconds."""
POLL_S = 0.25
"""Between two reads of `nvidia-smi` or `/is_sleeping` while waiting."""


class NotResident(SpecdashError):
    """A sleep or a wake failed; the message is one line with the evidence."""


@dataclass(frozen=True)
class Sleeper:
    """A sleeping server of a resident mode, as recorded on the host."""

    record: RunRecord
    awake_mib: Mapping[int, float]
    """Per GPU, what it held awake (just before its sleep)."""
    asleep_mib: Mapping[int, float]
    """Per GPU, what it held asleep (measured after the sleep)."""
    accept: float | None
    """Mean accept length of the greedy reference requests before the sleep (speculative SGLang modes)."""
    weights_mib: float = 0.0
    """The weights a level-1 sleep keeps in host RAM (from its start's log; 0 when the log did not say)."""

    @property
    def held_gib(self) -> float:
        """What it still holds on its busiest GPU."""
        return max(self.asleep_mib.values(), default=0.0) / 1024


def _residency(mode: ModeConfig) -> Residency:
    residency = get(mode.engine).residency
    if residency is None:  # refused by the config already; kept for a config built in code
        raise NotResident(f"{mode.engine} servers cannot sleep")
    return residency


def _path(call: HttpCall, mode: ModeConfig) -> str:
    return call.path.replace("{level}", str(mode.sleep_level))


async def read_gpus(session: ResidentSession) -> tuple[GpuSample, ...] | None:
    """The host's GPUs from its `nvidia-smi`; None when it has none."""
    result = await session.host.run(f"command -v nvidia-smi >/dev/null 2>&1 && {QUERY}", timeout=15.0)
    return parse_gpus(result.stdout) if result.ok else None


async def read_gpu_mib(session: ResidentSession) -> dict[int, float] | None:
    """Memory used per GPU from the host's `nvidia-smi`; None when it has none."""
    gpus = await read_gpus(session)
    return None if gpus is None else {g.index: g.mem_used_mib for g in gpus}


async def _call(base: str, call: HttpCall, path: str, timeout: float) -> None:
    """One sleep/wake request; `NotResident` with the status and the start of the body unless it is 2xx."""
    try:
        async with httpx.AsyncClient(base_url=base, timeout=timeout) as client:
            resp = await client.request(call.method, path, json=call.body)
    except httpx.TimeoutException:
        raise NotResident(f"{call.method} {path} did not answer within {timeout:.0f} s") from None
    except httpx.HTTPError as exc:
        raise NotResident(f"{call.method} {path} failed: {escape_controls(str(exc))}") from None
    if not resp.is_success:
        body = escape_controls(" ".join(resp.text.split())[:160])
        raise NotResident(f"{call.method} {path} answered {resp.status_code}: {body or '(empty)'}")


async def _wait_sleeping(base: str, residency: Residency, want: bool, deadline: float) -> None:
    """Poll the engine's `is_sleeping` until it says `want` (no-op for an engine without one)."""
    if residency.is_sleeping is None:
        return
    last = "no answer"
    async with httpx.AsyncClient(base_url=base, timeout=10.0) as client:
        while True:
            try:
                resp = await client.get(residency.is_sleeping)
                last = f"{resp.status_code} {' '.join(resp.text.split())[:80]}"
                if resp.is_success and bool(resp.json().get("is_sleeping")) is want:
                    return
            except (httpx.HTTPError, ValueError, AttributeError) as exc:
                last = str(exc)
            if time.monotonic() > deadline:
                raise NotResident(f"GET {residency.is_sleeping} still answers {escape_controls(last)}")
            await asyncio.sleep(POLL_S)


async def _wait_healthy(base: str, deadline: float) -> None:
    last = "no answer"
    async with httpx.AsyncClient(base_url=base, timeout=10.0) as client:
        while True:
            try:
                resp = await client.get("/health")
                if resp.status_code == 200:
                    return
                last = str(resp.status_code)
            except httpx.HTTPError as exc:
                last = str(exc) or type(exc).__name__
            if time.monotonic() > deadline:
                raise NotResident(
                    f"GET /health answered {escape_controls(last)} {HEALTH_TIMEOUT_S:.0f} s after the wake"
                )
            await asyncio.sleep(POLL_S)


_UNKNOWN = object()


def _workload(session: ResidentSession, mode: ModeConfig) -> tuple[str, list[str]]:
    """(workload key, prompts) of the wake check: the greedy check's prompts, `VERIFY_TOKENS` each."""
    settings = session.sweep_defaults.settings_for(mode.engine)
    n = session.greedy_prompts or session.config.bench.greedy_prompts or 8
    prompts = chosen_prompts(load_prompts("chat").prompts, n)
    return workload_key(prompts, settings.endpoint, VERIFY_TOKENS, settings.model), prompts


async def _greedy(session: ResidentSession, mode: ModeConfig, base: str) -> tuple[str, list[str], float | None]:
    """(workload key, greedy outputs, mean accept length) of the mode's server at `base`."""
    settings = session.sweep_defaults.settings_for(mode.engine)
    key, prompts = _workload(session, mode)
    accept: list[float] = []
    residency = get(mode.engine).residency
    speculative = residency is not None and is_speculative(residency, mode.args)
    before = await _metrics(base) if speculative else None
    texts = await greedy_outputs(
        base, prompts, endpoint=settings.endpoint, output_len=VERIFY_TOKENS, model=settings.model, accept=accept
    )
    if accept or before is None:
        return key, texts, mean(accept)
    # No per-request figure (vLLM): the server's counters around the requests, as a sweep level reads them.
    after = await _metrics(base)
    return key, texts, level_view(before, after, (), 1.0, None, None).accept_length if after else None


async def _metrics(base: str) -> dict[str, float] | None:
    """The server's Prometheus counters, or None when it has no /metrics."""
    try:
        async with httpx.AsyncClient(base_url=base, timeout=10.0) as client:
            resp = await client.get("/metrics")
    except httpx.HTTPError:
        return None
    return parse_prometheus(resp.text) if resp.is_success else None


async def sleep(session: ResidentSession, record: RunRecord, mode: ModeConfig) -> Sleeper:
    """Put the live server of a resident mode to sleep and record it; `NotResident` says why it did not."""
    residency = _residency(mode)
    before = await read_gpu_mib(session)
    if before is None:
        raise NotResident(f"cannot see GPU memory on {session.label} (no nvidia-smi): a sleep could not be verified")
    base = f"http://127.0.0.1:{await session.host.forward(record.port)}"
    store = session.store
    key, _ = _workload(session, mode)
    known = session.accept_by_run.get(record.id, _UNKNOWN)
    if store is None or store.greedy_outputs(session.label, mode.name, key) is None or known is _UNKNOWN:
        try:
            key, texts, accept = await _greedy(session, mode, base)
        except SpecdashError as exc:
            raise NotResident(f"no reference outputs before the sleep: {exc.message}") from None
        if store is not None and store.greedy_outputs(session.label, mode.name, key) is None:
            store.add_greedy_outputs(session.label, mode.name, key, texts)  # what a wake is verified against
    else:
        accept = known if isinstance(known, float) else None  # measured at its last wake: no need to ask again
    await _call(base, residency.sleep, _path(residency.sleep, mode), SLEEP_TIMEOUT_S)
    deadline = time.monotonic() + RELEASE_TIMEOUT_S
    await _wait_sleeping(base, residency, True, deadline)
    while True:
        now = await read_gpu_mib(session) or {}
        verdict = released(before, now)
        if verdict.ok:
            break
        if time.monotonic() > deadline:
            raise NotResident(
                f"{mode.name} said it sleeps but holds its memory {RELEASE_TIMEOUT_S:.0f} s later: {verdict.evidence}"
            )
        await asyncio.sleep(POLL_S)
    _, lines = await run_framed(
        session.host, f"grep -a -m 64 -E 'Load weight end|Model loading took' {shlex.quote(record.log_path)}"
    )
    weights = weights_mib(lines) or 0.0
    sleeper = Sleeper(record, before, now, accept, weights)
    marker = {
        "mode": mode.name,
        "awake_mib": before,
        "asleep_mib": now,
        "accept": accept,
        "weights_mib": weights,
        "slept_at": time.time(),
    }
    result = await run_script(
        session.host, "resident.sh", "asleep", record.id, json.dumps(marker), state_dir=session.host_config.state_dir
    )
    if not result.ok:
        raise NotResident(f"cannot record the sleeping server on {session.label}: {result.detail()}")
    return sleeper


HOST_RAM_QUERY = (
    'if [ -n "${SPECDASH_SIM_HOST_RAM_MIB:-}" ]; then echo "$SPECDASH_SIM_HOST_RAM_MIB"; '
    "else awk '/^MemAvailable:/ {print int($2 / 1024)}' /proc/meminfo; fi"
)
"""The host's available RAM in MiB; a simulated host (the demo's, the tests') says its own in
`SPECDASH_SIM_HOST_RAM_MIB`, as its `nvidia-smi` says its GPUs."""
DEFAULT_MEMORY_SHARE = {"vllm": 0.9, "sglang": 0.88}
"""What a server takes of each GPU when its flags do not say (vLLM's `--gpu-memory-utilization` default; SGLang
sizes `--mem-fraction-static` to the GPU, about 0.88 on an 80 GB card, plus activations)."""
MEMORY_FLAGS = ("--gpu-memory-utilization", "--mem-fraction-static")


def memory_share(mode: ModeConfig) -> float:
    """The share of each GPU the mode's server takes awake, from its memory flag or the engine's default."""
    args = list(mode.args)
    for i, arg in enumerate(args):
        name, _, value = arg.partition("=")
        if name in MEMORY_FLAGS:
            value = value or (args[i + 1] if i + 1 < len(args) else "")
            try:
                return min(1.0, max(0.0, float(value)))
            except ValueError:
                break
    return DEFAULT_MEMORY_SHARE.get(mode.engine, 0.9)


async def plan(session: ResidentSession, mode: ModeConfig, asleep: list[Sleeper]) -> MemoryPlan:
    """Whether `mode`'s server fits beside the sleeping ones: each GPU and the host's RAM, with the numbers
    (`core.resident.plan_memory`); what sleeps is what was measured after its sleep."""
    gpus = await read_gpus(session)
    if not gpus:
        return MemoryPlan(True, ("memory plan: no nvidia-smi on the host, nothing to plan",))
    total = max(g.mem_total_mib for g in gpus)
    residency = get(mode.engine).residency
    awake = memory_share(mode) * total
    held = awake * (residency.holds_fraction if residency is not None else 1.0)
    same = [s for s in asleep if s.record.mode == mode.name]
    new = ServerNeed(mode.name, awake, held, same[0].weights_mib if same else 0.0)
    others = [
        ServerNeed(
            s.record.mode,
            max(s.awake_mib.values(), default=0.0),
            max(s.asleep_mib.values(), default=0.0),
            s.weights_mib,
            measured=True,
        )
        for s in asleep
        if s.record.mode != mode.name
    ]
    result = await session.host.run(HOST_RAM_QUERY, timeout=15.0)
    said = result.stdout.strip().splitlines()[-1:] if result.ok else []
    avail = float(said[0]) if said and said[0].isdigit() else None
    return plan_memory([new, *others], total, avail)


async def sleepers(session: ResidentSession) -> list[Sleeper]:
    """The sleeping servers on the host, alive, as recorded by `sleep`."""
    result = await run_script(session.host, "resident.sh", "list", state_dir=session.host_config.state_dir)
    if not result.ok:
        raise SpecdashError(f"cannot list the sleeping servers on {session.label}: {result.detail()}")
    found = []
    for word, rest in result.lines:
        if word != "asleep":
            continue
        run_id, _, text = rest.partition(" ")
        record = await session.lifecycle.current(run_id)
        if record is None or not record.alive:
            continue
        try:
            marker = json.loads(text)
        except (json.JSONDecodeError, RecursionError):
            marker = {}
        found.append(
            Sleeper(
                record,
                _per_gpu(marker.get("awake_mib") if isinstance(marker, dict) else None),
                _per_gpu(marker.get("asleep_mib") if isinstance(marker, dict) else None),
                _number(marker.get("accept") if isinstance(marker, dict) else None),
                _number(marker.get("weights_mib") if isinstance(marker, dict) else None) or 0.0,
            )
        )
    return found


def _per_gpu(value: object) -> dict[int, float]:
    if not isinstance(value, dict):
        return {}
    return {int(k): float(v) for k, v in value.items() if str(k).isdigit() and isinstance(v, int | float)}


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


async def wake(
    session: ResidentSession, sleeper: Sleeper, mode: ModeConfig, on_state: Callable[[str], None]
) -> tuple[int, int, float | None]:
    """Wake a sleeping server and verify it: (identical, total, accept length); `NotResident` says why not."""
    residency = _residency(mode)
    gpus = {g.index: g for g in await read_gpus(session) or ()}
    for index, awake in sleeper.awake_mib.items():
        need = awake - sleeper.asleep_mib.get(index, 0.0)
        gpu = gpus.get(index)
        if gpu is not None and gpu.mem_used_mib + need > gpu.mem_total_mib:
            free = gpu.mem_total_mib - gpu.mem_used_mib
            raise NotResident(f"GPU{index} has {free:.0f} MiB free; {mode.name} needs {need:.0f} MiB more to wake")
    on_state("waking")
    base = f"http://127.0.0.1:{await session.host.forward(sleeper.record.port)}"
    await _call(base, residency.wake, _path(residency.wake, mode), WAKE_TIMEOUT_S)
    deadline = time.monotonic() + HEALTH_TIMEOUT_S
    await _wait_sleeping(base, residency, False, deadline)
    await _wait_healthy(base, deadline)
    on_state("verifying")
    key, texts, accept = await _greedy(session, mode, base)
    session.accept_by_run[sleeper.record.id] = accept
    stored = session.store.greedy_outputs(session.label, mode.name, key) if session.store is not None else None
    if stored is None:
        raise NotResident(f"no stored greedy outputs of {mode.name} on {session.label} to verify the wake against")
    check = compare_outputs(mode.name, f"{mode.name} (woken)", stored[1], texts)
    if check.identical < check.total:
        d = check.first
        where = f"; prompt {d.prompt_index} differs at character {d.offset}: {d.other!r}" if d else ""
        raise NotResident(f"wrong answers after the wake: {check.identical}/{check.total} identical{where}")
    if sleeper.accept is not None:
        if accept is None:
            raise NotResident("the woken server reports no accept length (its drafter is gone?)")
        verdict = check_accept(sleeper.accept, accept)
        if not verdict.ok:
            raise NotResident(f"after the wake, {verdict.text}")
    return check.identical, check.total, accept


async def mark_awake(session: ResidentSession, record: RunRecord) -> None:
    """Make a woken server the host's current run again."""
    result = await run_script(session.host, "resident.sh", "awake", record.id, state_dir=session.host_config.state_dir)
    if not result.ok:
        raise NotResident(f"cannot record the woken server on {session.label}: {result.detail()}")
