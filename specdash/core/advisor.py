"""The startup advisor: from a start's log, where the time went and what would cut it, each piece of advice
with its evidence line and a predicted saving in seconds (pure; `specdash advise` reads the logs).

The rules, each from what the log itself shows:

- **CUDA graphs for batch sizes nobody runs.** The engine captured graphs up to batch size B (SGLang's
  `Capturing batches (bs=...)` lines or `cuda_graph_max_bs`, vLLM's capture bars and capture sizes) while
  the sweeps and the policy run at most C concurrent requests. Capturing only sizes <= C saves the capture
  phases' share of the sizes left out (time per size taken as equal: an under-estimate, larger sizes take
  longer). Above C the batch then runs without a graph: throughput at high concurrency changes, which the
  advice says.
- **Compilation redone.** vLLM compiled without a cache hit (`Compiling model again due to a load failure`, or
  no `Directly load the compiled graph` / `Directly load AOT compilation` line): keep the compile cache on a
  persistent disk between restarts; saves the compile time but about a tenth (loading the cached graph). The
  compile time is vLLM's own `torch.compile takes X s in total` where it prints one; where it prints none (the
  CPU build's AOT compile says only `saved AOT compiled function`), the compiling phase's span.
- **DeepGEMM JIT compiling at start.** Lines naming DeepGEMM while it compiles: precompile its kernels once
  (`python3 -m sglang.compile_deep_gemm` with the launch arguments); saves the span of those lines.
- **Weights read slowly.** Loading weights takes more than a third of the start and more than 30 s: at
  `FAST_LOAD_GBPS` (a local NVMe copy) the weights' size (from the log) would take `size / rate`; the advice
  says so as an assumption.

Absurd input is refused with one message (`AdvisorError`): timestamps that go backwards by more than
`BACKWARDS_S`, a start spread over more than `MAX_SPAN_S`, a graph batch size above `MAX_GRAPH_BS`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

from specdash.core.timeline import replay_lines
from specdash.engines.registry import UNKNOWN, detect_engine, make_rules
from specdash.phases import Phase

MAX_GRAPH_BS = 65_536
"""No engine captures a CUDA graph for more requests than this; a larger size is a damaged log."""
BACKWARDS_S = 120.0
"""Lines of several processes interleave a little out of order; more than this backwards is not a start."""
MAX_SPAN_S = 2 * 86_400.0
"""A start spread over more than two days is several logs, or a damaged one."""
FAST_LOAD_GBPS = 2.0
"""The read rate the weights advice assumes (a local NVMe copy of the weights), GB/s."""
COMPILE_CACHE_SHARE = 0.9
"""Share of the compile time a warm compile cache saves (the rest: loading the cached artefacts)."""
SGLANG_GRAPH_SIZES = (1, 2, 4, 8, 12, *range(16, 257, 8), *range(272, 513, 16))
"""SGLang's default capture batch sizes (v0.5.6 `_get_default_cuda_graph_bs`, without `--cuda-graph-bs`)."""


class AdvisorError(ValueError):
    """A log the advisor cannot trust, with the one-line reason."""


@dataclass(frozen=True)
class Advice:
    """One thing that would cut the start."""

    title: str
    """What to do, in a few words."""
    flag: str
    """The launch flag or setting that does it."""
    phase: str
    """The startup phase it shortens (`Phase.value`)."""
    saving_s: float
    """Predicted seconds saved on the next start."""
    evidence: str
    """`line N: <the log line>` that shows it."""
    caveat: str = ""
    """What else changes (throughput at high concurrency...), so nothing changes the measurement silently."""


@dataclass(frozen=True)
class Report:
    """Where one start's time went and what would cut it."""

    engine: str
    total_s: float | None
    phases: tuple[tuple[str, float], ...]
    advice: tuple[Advice, ...] = field(default_factory=tuple)
    compile_s: float = 0.0
    """torch.compile's total from the log (0: none), for the measured saving of the compile cache."""

    def as_dict(self) -> dict[str, object]:
        """The `--json` form."""
        return {
            "engine": self.engine,
            "total_s": self.total_s,
            "phases": [{"phase": p, "seconds": round(s, 2)} for p, s in self.phases],
            "advice": [asdict(a) for a in self.advice],
            "compile_s": self.compile_s,
        }


_SGL_BS = re.compile(r"Capturing batches \(bs=(\d+)")
_SGL_MAX_BS = re.compile(r"cuda_graph_max_bs=(\d+)")
_SGL_BS_LIST = re.compile(r"cuda_graph_bs=\[([\d,\s]+)\]")
_VLLM_SIZES = re.compile(r"cudagraph_capture_sizes['\"]?[:=]\s*\[([\d,\s]+)\]")
_VLLM_BAR = re.compile(r"Capturing (?:CUDA graph(?:s| shapes)|batches)[^:]*:\s+\d+%\|[^|]*\|\s*\d+/(\d+)")
_COMPILE_TOTAL = re.compile(r"torch\.compile takes ([\d.]+) s in total")
_COMPILE_AGAIN = "Compiling model again due to a load failure"
_COMPILE_HIT = ("Directly load the compiled graph", "Directly load AOT compilation")
_COMPILE_SAVED = "saved AOT compiled function"
_DEEPGEMM = re.compile(r"deep_?gemm", re.IGNORECASE)
_WEIGHTS_GB = re.compile(
    r"(?:Load weight end\..*?mem usage=|Model loading took |Loading weights took [\d.]+ seconds.*?)([\d.]+) ?(?:GB|GiB)"
)


def _sizes(text: str) -> list[int]:
    return [int(x) for x in re.split(r"[,\s]+", text.strip()) if x.isdigit()]


@dataclass
class _Scan:
    """What the lines say beyond the phases."""

    graph_sizes: set[int] = field(default_factory=set)
    size_line: str = ""
    max_bs: int | None = None
    bar_total: int | None = None
    compile_s: float = 0.0
    compile_line: str = ""
    compile_hit: bool = False
    compile_again: bool = False
    again_line: str = ""
    """The line where vLLM says the cached graph failed to load, with its reason."""
    compile_saved: str = ""
    """The line where vLLM saved what it had just compiled (no total of its own: the phase's span times it)."""
    deepgemm: list[tuple[float, str]] = field(default_factory=list)
    weights_gb: float | None = None
    timed: int = 0
    """Lines with a timestamp."""


def scan(lines: Sequence[str], engine: str) -> _Scan:
    """Read the lines once: check their timestamps and graph sizes, collect what the rules need."""
    rules = make_rules(engine)
    s = _Scan()
    first: float | None = None
    latest: float | None = None
    for number, raw in enumerate(lines, 1):
        line = rules.clean(raw)
        t = line.time
        if t is not None:
            s.timed += 1
            if latest is not None and t < latest - BACKWARDS_S:
                raise AdvisorError(
                    f"line {number}: its timestamp is {latest - t:.0f} s before an earlier line's: "
                    "the lines are out of order or from several logs; the advisor needs one start's log"
                )
            first = t if first is None else min(first, t)
            latest = t if latest is None else max(latest, t)
            if latest - first > MAX_SPAN_S:
                raise AdvisorError(
                    f"line {number}: {(latest - first) / 86_400:.0f} days after the first line: "
                    "one start does not take that long; the advisor needs one start's log"
                )
        text = line.text
        where = f"line {number}: {text.strip()[:200]}"
        sizes: list[int] = []
        if found := _SGL_BS.findall(text):
            sizes = [int(x) for x in found]
        elif m := _SGL_BS_LIST.search(text) or _VLLM_SIZES.search(text):
            sizes = _sizes(m.group(1))
        for size in sizes:
            if size > MAX_GRAPH_BS:
                raise AdvisorError(f"line {number}: a CUDA graph for batch size {size} is not a real capture")
        if sizes:
            s.graph_sizes.update(sizes)
            s.size_line = s.size_line or where
        if m := _SGL_MAX_BS.search(text):
            s.max_bs = int(m.group(1))
            if s.max_bs > MAX_GRAPH_BS:
                raise AdvisorError(f"line {number}: cuda_graph_max_bs={s.max_bs} is not a real setting")
            s.size_line = s.size_line or where
        if m := _VLLM_BAR.search(text):
            total = int(m.group(1))
            if total > MAX_GRAPH_BS:
                raise AdvisorError(f"line {number}: {total} CUDA graph sizes is not a real capture")
            s.bar_total = max(s.bar_total or 0, total)
            s.size_line = s.size_line or where
        if m := _COMPILE_TOTAL.search(text):
            s.compile_s = max(s.compile_s, float(m.group(1)))
            s.compile_line = where
        s.compile_hit = s.compile_hit or any(hit in text for hit in _COMPILE_HIT)
        if _COMPILE_SAVED in text and not s.compile_saved:
            s.compile_saved = where
        if _COMPILE_AGAIN in text and not s.compile_again:
            s.compile_again, s.again_line = True, f"line {number}: {text.strip()[:400]}"
        if _DEEPGEMM.search(text) and "compil" in text.lower() and t is not None:
            s.deepgemm.append((t, where))
        if (m := _WEIGHTS_GB.search(text)) and s.weights_gb is None:
            s.weights_gb = float(m.group(1))
    return s


def advise(lines: Sequence[str], used_max: int, engine: str = "auto") -> Report:
    """The report for one start's log lines; `used_max`: the largest concurrency the sweeps and the policy use.

    Raises:
        AdvisorError: absurd timestamps or graph sizes, or a log without one timed startup phase.
    """
    if engine == "auto":
        engine = detect_engine(lines[:2000])
    if engine == UNKNOWN:
        raise AdvisorError("not a server log specdash knows (no SGLang or vLLM lines)")
    s = scan(lines, engine)
    timeline = replay_lines(iter(lines), engine)
    durations = {p: d for p, d in timeline.durations().items() if p.is_startup}
    if not s.timed:
        raise AdvisorError("no line of this log has a timestamp: the advisor times phases from them")
    total = timeline.total()
    if not s.compile_s and (s.compile_saved or s.compile_hit):
        # No total printed: the compiling phase's span is the compile (or the cached graph's load).
        s.compile_s = durations.get(Phase.COMPILING, 0.0)
        s.compile_line = s.compile_saved or f"{Phase.COMPILING.value} took {s.compile_s:.0f} s"
    advice = [a for a in (_graphs(s, durations, used_max, engine), _compile(s, engine), _deepgemm(s)) if a]
    if (weights := _weights(s, durations, total)) is not None:
        advice.append(weights)
    advice.sort(key=lambda a: -a.saving_s)
    phases = tuple((p.value, d) for p, d in durations.items())
    return Report(engine, total, phases, tuple(a for a in advice if a.saving_s >= 1.0), s.compile_s)


def _graphs(s: _Scan, durations: dict[Phase, float], used_max: int, engine: str) -> Advice | None:
    seen = sorted(s.graph_sizes)
    largest = max([*seen, s.max_bs or 0])
    if not largest or not s.size_line:
        return None
    if len(seen) >= 2 and len(seen) >= (s.bar_total or 0):
        sizes, source = seen, "sizes in the log"
    elif engine == "sglang":
        # SGLang's bar names only the size being captured: its default list up to the largest size seen.
        sizes, source = [b for b in SGLANG_GRAPH_SIZES if b <= largest], "SGLang's default sizes"
    else:
        return None  # a vLLM bar's count alone does not say which sizes were captured
    count = len(sizes)
    kept = min(count, len([b for b in sizes if b < used_max]) + 1)  # the first size >= used_max covers it
    if largest <= used_max or kept >= count:
        return None
    capture = durations.get(Phase.CAPTURING_GRAPHS, 0.0) + durations.get(Phase.CAPTURING_DRAFT_GRAPHS, 0.0)
    saving = capture * (1 - kept / count)
    cover = next((b for b in sizes if b >= used_max), largest)
    flag = (
        f"--cuda-graph-max-bs {cover}"
        if engine == "sglang"
        else f"--compilation-config '{{\"max_cudagraph_capture_size\": {cover}}}'"
    )
    return Advice(
        title=f"capture CUDA graphs for batch sizes up to {cover} only ({kept} of {count} {source})",
        flag=flag,
        phase=Phase.CAPTURING_GRAPHS.value,
        saving_s=saving,
        evidence=s.size_line,
        caveat=(
            f"batches above {cover} requests then run without a CUDA graph: throughput at concurrency above "
            f"{cover} drops; the sweeps and the policy use at most {used_max}"
        ),
    )


def _compile(s: _Scan, engine: str) -> Advice | None:
    if not s.compile_s or (s.compile_hit and not s.compile_again):
        return None
    cache = (
        "VLLM_CACHE_ROOT on a persistent disk (default ~/.cache/vllm)"
        if engine == "vllm"
        else "TORCHINDUCTOR_CACHE_DIR"
    )
    if s.compile_again:
        # The cache was kept and found, but did not load: keeping it is not the cure, the reason is.
        return Advice(
            title="the torch.compile cache is kept but failed to load, so it compiled again",
            flag=f"fix the cause the evidence line gives (a version or flag change, a damaged file); {cache} keeps it",
            phase=Phase.COMPILING.value,
            saving_s=s.compile_s * COMPILE_CACHE_SHARE,
            evidence=s.again_line,
            caveat="a cache that loads saves this; one that fails every time (an engine bug) saves nothing",
        )
    return Advice(
        title="keep the torch.compile cache across restarts (nothing was loaded from a compile cache)",
        flag=cache,
        phase=Phase.COMPILING.value,
        saving_s=s.compile_s * COMPILE_CACHE_SHARE,
        evidence=s.compile_line,
        caveat="same code and flags only: a different version or flag compiles again (no change to throughput)",
    )


def _deepgemm(s: _Scan) -> Advice | None:
    if len(s.deepgemm) < 2:
        return None
    span = s.deepgemm[-1][0] - s.deepgemm[0][0]
    return Advice(
        title="precompile the DeepGEMM kernels once instead of at every start",
        flag="python3 -m sglang.compile_deep_gemm <the launch arguments>",
        phase=Phase.WARMING_UP.value,
        saving_s=span,
        evidence=s.deepgemm[0][1],
        caveat="the kernels are the same: no change to throughput",
    )


def _weights(s: _Scan, durations: dict[Phase, float], total: float | None) -> Advice | None:
    took = durations.get(Phase.LOADING_WEIGHTS, 0.0)
    if s.weights_gb is None or not total or took < 30.0 or took < total / 3:
        return None
    fast = s.weights_gb / FAST_LOAD_GBPS
    if fast >= took:
        return None
    return Advice(
        title=f"read the weights faster ({s.weights_gb:.0f} GB took {took:.0f} s: {s.weights_gb / took:.2f} GB/s)",
        flag="a local NVMe copy of the model (or --load-format runai_streamer / fastsafetensors)",
        phase=Phase.LOADING_WEIGHTS.value,
        saving_s=took - fast,
        evidence=f"{Phase.LOADING_WEIGHTS.value} took {took:.0f} s of {total:.0f} s",
        caveat=f"assumes {FAST_LOAD_GBPS:g} GB/s; no change to throughput",
    )


def measured_saving(before: Report, after: Report, advice: Advice) -> float:
    """Seconds the start saved where `advice` predicted it: its phase (with the draft graphs for graph
    advice) in `before` minus in `after`; the compile total for the compile cache."""
    if advice.phase == Phase.COMPILING.value:
        return before.compile_s - after.compile_s
    wanted = {advice.phase}
    if advice.phase == Phase.CAPTURING_GRAPHS.value:
        wanted.add(Phase.CAPTURING_DRAFT_GRAPHS.value)
    a, b = dict(before.phases), dict(after.phases)
    return sum(a.get(p, 0.0) for p in wanted) - sum(b.get(p, 0.0) for p in wanted)


def report_text(report: Report) -> list[str]:
    """The lines `specdash advise` prints."""
    total = f"{report.total_s:.0f} s" if report.total_s else "unfinished"
    out = [f"start: {total} ({report.engine})"]
    for phase, seconds in sorted(report.phases, key=lambda p: -p[1]):
        share = f" ({seconds / report.total_s:.0%})" if report.total_s else ""
        out.append(f"  {phase:<24} {seconds:7.1f} s{share}")
    if not report.phases:
        out.append("  (no startup phase in this log: it starts after the server was up, or before any phase)")
    if not report.advice:
        out.append("nothing to advise: no phase shows time the log says could be saved")
    for n, a in enumerate(report.advice, 1):
        out.append(f"{n}. {a.title}: save about {a.saving_s:.0f} s")
        out.append(f"   do: {a.flag}")
        out.append(f"   evidence: {a.evidence}")
        if a.caveat:
            out.append(f"   note: {a.caveat}")
    return out
