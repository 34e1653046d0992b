"""`specdash sim` flags: SGLang's launch flags (names and defaults as in v0.5.6) plus `--sim-*` ones.

Unknown SGLang flags are accepted and logged, not fatal, so a real launch command line works with only
the launcher swapped. An unknown `--sim-*` flag is a typo in *our* flags and stays a usage error.
`resolve` applies SGLang's post-processing (`ServerArgs.__post_init__`): NEXTN -> EAGLE, the all-or-none
rule for the three draft parameters, topk=1 forcing draft tokens to steps + 1, and the 48-request cap,
returning the warning lines SGLang logs for each.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from specdash.engines.spec_settings import SpecSetting, check_sglang
from specdash.errors import UsageError
from specdash.limits import MAX_TIME_SCALE, MAX_TP, PID, PORT, TP, int_option, number_option
from specdash.sim.faults import Faults, faults_epilog, parse_faults

SPEC_ALGORITHMS = ("EAGLE", "EAGLE3", "NEXTN", "NGRAM", "STANDALONE")
LOG_STYLES = ("sglang-0.5", "sglang-2026", "vllm-0.24")
VLLM_METHODS = {"ngram": "NGRAM", "eagle3": "EAGLE3", "eagle": "EAGLE"}
"""`--speculative-config` methods the vLLM style simulates -> the simulator's algorithm."""
MAX_CONTEXT = 1 << 30
"""The longest `--context-length` (a billion tokens)."""
_DRAFT = int_option(1, 1024)
"""Draft steps, top-k and draft tokens (SGLang's real ones are below 64)."""
_COUNT = int_option(1, 1_000_000)
"""Batch sizes, request caps, log intervals."""
_SEED = int_option(0, 2**63 - 1)
"""A random seed."""
_NODES = int_option(1, MAX_TP)
"""Nodes of one server (each runs one rank at least)."""
_NODE_RANK = int_option(0, MAX_TP - 1)
"""A node's rank (checked against `--nnodes` once both are known)."""
UNKNOWN_ATTR = "sim_unknown_flags"
"""Namespace attribute that collects the unrecognised SGLang flags."""


class SpecParamsError(Exception):
    """Only some of the three speculative draft parameters were given (SGLang asserts)."""


class SpecRefusedError(Exception):
    """A draft setting SGLang cannot run (`specdash.engines.spec_settings.check_sglang` says why)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the flags on `parser` and make it keep unknown flags instead of failing."""
    sg = parser.add_argument_group("SGLang flags (same names and defaults as sglang.launch_server)")
    sg.add_argument("--model-path", "--model", dest="model_path", required=True, help="model directory or HF id")
    sg.add_argument("--tokenizer-path", default=None)
    sg.add_argument("--served-model-name", default=None)
    sg.add_argument("--tp-size", "--tp", "--tensor-parallel-size", dest="tp_size", type=TP, default=1)
    sg.add_argument("--host", default="127.0.0.1")
    sg.add_argument("--nnodes", type=_NODES, default=1, help="nodes of one server (a Slurm job's srun step per node)")
    sg.add_argument("--node-rank", type=_NODE_RANK, default=0, help="this node's rank; rank 0 serves HTTP")
    sg.add_argument("--dist-init-addr", default=None, help="HEAD:PORT of the rendezvous (several nodes)")
    sg.add_argument("--port", type=PORT, default=30000)
    sg.add_argument("--speculative-algorithm", type=str.upper, default=None, choices=SPEC_ALGORITHMS)
    sg.add_argument("--speculative-draft-model-path", "--speculative-draft-model", default=None)
    sg.add_argument("--speculative-num-steps", type=_DRAFT, default=None)
    sg.add_argument("--speculative-eagle-topk", type=_DRAFT, default=None)
    sg.add_argument("--speculative-num-draft-tokens", type=_DRAFT, default=None)
    sg.add_argument("--cuda-graph-max-bs", type=_COUNT, default=None)
    sg.add_argument("--max-running-requests", type=_COUNT, default=None)
    sg.add_argument("--context-length", type=int_option(1, MAX_CONTEXT), default=None)
    sg.add_argument("--enable-metrics", action="store_true")
    sg.add_argument("--enable-torch-compile", action="store_true", help="compile inside graph capture (cached)")
    sg.add_argument("--torch-compile-max-bs", type=_COUNT, default=32)
    sg.add_argument("--disable-overlap-schedule", action="store_true")
    sg.add_argument("--skip-server-warmup", action="store_true")
    sg.add_argument("--decode-log-interval", type=_COUNT, default=40)
    sg.add_argument("--random-seed", type=_SEED, default=None, help="SGLang's seed; when given, it is the --sim-seed")
    sg.add_argument("--enable-memory-saver", action="store_true", help="memory release/resume really release")
    sg.add_argument("--enable-weights-cpu-backup", action="store_true", help="weights survive a release")
    sg.add_argument("--enable-draft-weights-cpu-backup", action="store_true", help="draft weights survive it")
    vl = parser.add_argument_group("vLLM flags (with --sim-log-style vllm-0.24)")
    vl.add_argument("--speculative-config", default=None, help="vLLM's JSON: method ngram, eagle3 or eagle")
    vl.add_argument("--enable-sleep-mode", action="store_true", help="/sleep and /wake_up (VLLM_SERVER_DEV_MODE=1)")
    vl.add_argument("--max-model-len", type=int_option(1, MAX_CONTEXT), default=None, help="vLLM's context length")
    sim = parser.add_argument_group("simulator flags")
    sim.add_argument(
        "--sim-time-scale",
        type=number_option(0.0, MAX_TIME_SCALE),
        default=1.0,
        help="multiplies startup/shutdown durations",
    )
    sim.add_argument(
        "--sim-speed",
        type=number_option(0.0, 1000.0, low_open=True),
        default=1.0,
        help="divides decode step times (stress tests only)",
    )
    sim.add_argument("--sim-seed", type=_SEED, default=0, help="seeds timing jitter, acceptance and early stops")
    sim.add_argument("--sim-log-style", choices=LOG_STYLES, default="sglang-0.5")
    sim.add_argument(
        "--sim-fault", action="append", default=[], metavar="FAULT", help="inject a fault (repeatable; listed below)"
    )
    sim.add_argument("--sim-disable-spec-above", type=_COUNT, default=None, metavar="N")
    sim.add_argument(
        "--sim-request-log",
        default=None,
        metavar="PATH",
        help="append one JSON line per finished request (ground truth)",
    )
    sim.add_argument(
        "--sim-h2d-gbps",
        type=number_option(0.0, 10_000.0, low_open=True),
        default=25.0,
        metavar="GB/S",
        help="host-device copy rate of a resume",
    )
    sim.add_argument("--sim-exit-with", type=PID, default=None, metavar="PID", help="exit when PID is gone (demo)")
    parser.epilog = f"{faults_epilog()}\n\n{NVIDIA_SMI_NOTE}"
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    _keep_unknown(parser)


NVIDIA_SMI_NOTE = (
    "GPU panel: the simulator's TP ranks report pretend GPUs (memory by startup phase, utilisation by load)\n"
    "to a simulated nvidia-smi. On a host without GPUs, install it where SSH commands find it, e.g.\n"
    "  python3 -m specdash.sim.gpus --install /usr/local/bin"
)


def _keep_unknown(parser: argparse.ArgumentParser) -> None:
    # The top-level CLI calls parse_args(), which rejects anything a subparser leaves over. Subparsers are
    # driven through their own parse_known_args, so wrapping it on this one instance keeps the leftovers
    # in the namespace instead: SGLang flags we do not simulate must not be fatal.
    original = parser.parse_known_args

    def parse_known_args(
        args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        ns, extras = original(args, namespace)
        setattr(ns, UNKNOWN_ATTR, [*getattr(ns, UNKNOWN_ATTR, []), *extras])
        return ns, []

    setattr(parser, "parse_known_args", parse_known_args)  # noqa: B010 - mypy rejects assigning a method


@dataclass(frozen=True)
class SimConfig:
    """Resolved settings of one simulated server (JSON-serialisable; the TP children get a copy)."""

    model_path: str
    tokenizer_path: str
    served_model_name: str
    tp_size: int
    host: str
    port: int
    speculative_algorithm: str | None
    speculative_draft_model_path: str | None
    speculative_num_steps: int | None
    speculative_eagle_topk: int | None
    speculative_num_draft_tokens: int | None
    cuda_graph_max_bs: int
    max_running_requests: int | None
    """None: derived from KV memory (effectively unlimited); 48 with speculation unless given."""
    context_length: int | None
    enable_metrics: bool
    disable_overlap_schedule: bool
    skip_server_warmup: bool
    decode_log_interval: int
    spec_v2: bool
    """`SGLANG_ENABLE_SPEC_V2` was set (v0.5.6 overlap-scheduled EAGLE)."""
    time_scale: float
    speed: float
    seed: int
    log_style: str
    disable_spec_above: int | None
    faults: Faults = field(default_factory=Faults)
    exit_with: int | None = None
    """Exit (with the whole tree) once this PID is gone: `specdash demo` leaves no simulator behind."""
    memory_saver: bool = False
    """`--enable-memory-saver`: `/release_memory_occupation` really releases (`specdash.sim.memory`)."""
    weights_cpu_backup: bool = False
    """`--enable-weights-cpu-backup`: the weights are copied to host memory on release."""
    draft_weights_cpu_backup: bool = False
    """`--enable-draft-weights-cpu-backup`: the draft model's too."""
    h2d_gbps: float = 25.0
    """Host-device copy rate per GPU (GB/s) for a release or resume with weights backup."""
    request_log: str | None = None
    """Append one JSON line per finished request here (see `specdash.sim.app.request_record`): the
    server-side timestamps benchmarks compare a client's measurements with."""
    torch_compile_max_bs: int | None = None
    """`--enable-torch-compile`: the batch sizes up to this are compiled during capture (None: off)."""
    compile_cache_dir: str | None = None
    """`TORCHINDUCTOR_CACHE_DIR` when set (else the simulator's state dir, see `specdash.sim.startup`)."""
    unknown_flags: tuple[str, ...] = ()
    nnodes: int = 1
    """Nodes of the server (`--nnodes`): each runs `tp_size / nnodes` ranks; only node rank 0 serves HTTP."""
    node_rank: int = 0
    """This node's rank (`--node-rank`)."""
    dist_init_addr: str | None = None
    """`HEAD:PORT` of the rendezvous (`--dist-init-addr`), required with several nodes as in SGLang."""
    sleep_endpoints: bool = False
    """vLLM style: `--enable-sleep-mode` with `VLLM_SERVER_DEV_MODE=1`, so `/sleep`, `/wake_up` and
    `/is_sleeping` exist (404 otherwise, as on a real vLLM server)."""
    sleep_mode: bool = False
    """vLLM style: `--enable-sleep-mode` (its cumem allocator line is printed even without the endpoints)."""

    @property
    def ranks_per_node(self) -> int:
        """TP ranks on each node."""
        return max(1, self.tp_size // max(1, self.nnodes))

    @property
    def first_rank(self) -> int:
        """The global TP rank of this node's first rank."""
        return self.node_rank * self.ranks_per_node

    @property
    def vllm(self) -> bool:
        """True for vLLM 0.24's wording and endpoints (`specdash.sim.vllm_log`)."""
        return self.log_style.startswith("vllm")

    @property
    def style_2026(self) -> bool:
        """True for the 2026 (HEAD) log wording."""
        return self.log_style == "sglang-2026"

    def to_json(self) -> dict[str, Any]:
        """A plain dict (for the TP children's command line)."""
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SimConfig:
        """Inverse of `to_json`."""
        data = dict(data)
        data["faults"] = Faults(**data["faults"])
        data["unknown_flags"] = tuple(data["unknown_flags"])
        return cls(**data)

    def server_args_repr(self) -> str:
        """The `server_args=ServerArgs(...)` line (the fields that matter, in SGLang's order)."""
        fields: list[tuple[str, object]] = [
            ("model_path", self.model_path),
            ("tokenizer_path", self.tokenizer_path),
            ("tokenizer_mode", "auto"),
            ("load_format", "auto"),
            ("trust_remote_code", True),
            ("context_length", self.context_length),
            ("host", self.host),
            ("port", self.port),
            ("dtype", "auto"),
            ("kv_cache_dtype", "auto"),
            ("served_model_name", self.served_model_name),
            ("mem_fraction_static", 0.85 if self.speculative_algorithm else 0.87),
            ("max_running_requests", self.max_running_requests),
            ("chunked_prefill_size", 16384),
            ("max_prefill_tokens", 16384),
            ("schedule_policy", "fcfs"),
            ("tp_size", self.tp_size),
            ("pp_size", 1),
            ("stream_interval", 1),
            ("random_seed", self.seed),
            ("log_level", "info"),
            ("decode_log_interval", self.decode_log_interval),
            ("enable_metrics", self.enable_metrics),
            ("dp_size", 1),
            ("speculative_algorithm", self.speculative_algorithm),
            ("speculative_draft_model_path", self.speculative_draft_model_path),
            ("speculative_num_steps", self.speculative_num_steps),
            ("speculative_eagle_topk", self.speculative_eagle_topk),
            ("speculative_num_draft_tokens", self.speculative_num_draft_tokens),
            ("speculative_accept_threshold_single", 1.0),
            ("speculative_accept_threshold_acc", 1.0),
            ("disable_cuda_graph", False),
            ("cuda_graph_max_bs", self.cuda_graph_max_bs),
            ("disable_overlap_schedule", self.disable_overlap_schedule),
            ("skip_server_warmup", self.skip_server_warmup),
        ]
        return "ServerArgs(" + ", ".join(f"{k}={v!r}" for k, v in fields) + ")"


def _host_port(addr: str) -> bool:
    host, _, port = addr.rpartition(":")
    return bool(host) and port.isdigit() and 0 < int(port) < 65536


def resolve(ns: argparse.Namespace, env: Mapping[str, str] | None = None) -> tuple[SimConfig, list[str]]:
    """Apply SGLang's argument post-processing; return the config and the warning lines to log.

    Raises:
        SpecParamsError: some but not all of the three draft parameters were given.
        UsageError: a bad simulator flag.
    """
    env = os.environ if env is None else env
    warnings: list[str] = []
    unknown = tuple(getattr(ns, UNKNOWN_ATTR, []))
    bad = [flag for flag in unknown if flag.startswith("--sim-")]
    if bad:
        raise UsageError(f"unrecognized simulator flag: {bad[0]}")
    if ns.sim_h2d_gbps <= 0:
        raise UsageError("--sim-h2d-gbps must be > 0")
    if ns.sim_time_scale < 0 or ns.sim_speed <= 0:
        raise UsageError("--sim-time-scale must be >= 0 and --sim-speed > 0")
    faults = parse_faults(ns.sim_fault)
    if ns.nnodes < 1 or not 0 <= ns.node_rank < ns.nnodes:
        raise UsageError(f"--node-rank {ns.node_rank} is not one of the {ns.nnodes} node(s) of --nnodes")
    if ns.nnodes > 1 and (ns.tp_size % ns.nnodes or not ns.dist_init_addr):
        raise UsageError("several nodes need --tp-size divisible by --nnodes and --dist-init-addr HEAD:PORT")
    if faults.slow_node is not None and faults.slow_node >= ns.nnodes:
        raise UsageError(f"--sim-fault slow-node={faults.slow_node}: not one of the {ns.nnodes} node(s) of --nnodes")
    if ns.nnodes > 1 and not _host_port(ns.dist_init_addr):
        raise UsageError(f"--dist-init-addr {ns.dist_init_addr!r}: expected HEAD:PORT")
    algo: str | None = ns.speculative_algorithm
    steps, topk, draft = ns.speculative_num_steps, ns.speculative_eagle_topk, ns.speculative_num_draft_tokens
    vllm = ns.sim_log_style.startswith("vllm")
    if ns.speculative_config is not None or ns.enable_sleep_mode:
        if not vllm:
            raise UsageError(
                "--speculative-config and --enable-sleep-mode are vLLM flags: add --sim-log-style vllm-0.24"
            )
    if vllm and ns.speculative_config is not None:
        algo, ns.speculative_draft_model_path, steps = _vllm_spec(ns.speculative_config)
        topk, draft = 1, steps + 1
    max_running: int | None = ns.max_running_requests
    spec_v2 = env.get("SGLANG_ENABLE_SPEC_V2", "").lower() in ("1", "true", "yes")
    disable_overlap = bool(ns.disable_overlap_schedule)
    style_2026 = ns.sim_log_style == "sglang-2026"
    if algo == "NEXTN":
        algo = "EAGLE"
    if vllm:
        pass  # vLLM has none of SGLang's post-processing: its speculative config is taken as given
    elif algo is not None and algo != "NGRAM":
        given = [v is not None for v in (steps, topk, draft)]
        if any(given) and not all(given):
            raise SpecParamsError()
        if steps is None:
            # v0.5.6 auto_choose_speculative_params: DeepSeek-like models and STANDALONE get (3, 1, 4).
            steps, topk, draft = 3, 1, 4
        if topk == 1 and draft != (steps or 0) + 1:
            draft = (steps or 0) + 1
            warnings.append(
                "speculative_num_draft_tokens is adjusted to speculative_num_steps + 1 when speculative_eagle_topk == 1"
            )
        if check_sglang(SpecSetting(steps, topk, draft)).runs_as is None:
            # SGLang fails later, in torch.topk at the first draft forward; the simulator fails at once.
            raise SpecRefusedError(check_sglang(SpecSetting(steps, topk, draft)).reason)
        if max_running is None:
            max_running = 48
            warnings.append(
                "Max running requests is reset to 48 for speculative decoding. "
                "You can override this by explicitly setting --max-running-requests."
            )
        if style_2026:
            if "SGLANG_ENABLE_SPEC_V2" in env:
                warnings.append(
                    "SGLANG_ENABLE_SPEC_V2 has been removed: speculative decoding always runs the V2 worker. "
                    "Use --disable-overlap-schedule to select the non-overlap (synchronous) path."
                )
            spec_v2 = not disable_overlap
        elif spec_v2 and algo in ("EAGLE", "EAGLE3"):
            warnings.append("Beta spec is enabled for eagle speculative decoding and overlap schedule is turned on.")
        elif not disable_overlap:
            disable_overlap = True
            warnings.append("Overlap scheduler is disabled because of using eagle3 or standalone speculative decoding.")
    elif algo == "NGRAM":
        steps, topk, draft = steps or 12, topk or 1, draft or 12
        if max_running is None:
            max_running = 48
            warnings.append(
                "Max running requests is reset to 48 for speculative decoding. "
                "You can override this by explicitly setting --max-running-requests."
            )
    if ns.sim_disable_spec_above is not None and algo is None:
        raise UsageError("--sim-disable-spec-above needs --speculative-algorithm")
    default_graph_bs = 256 if algo is None else 48
    graph_bs = ns.cuda_graph_max_bs or default_graph_bs
    if max_running is not None:
        graph_bs = min(graph_bs, max_running)
    config = SimConfig(
        model_path=ns.model_path,
        tokenizer_path=ns.tokenizer_path or ns.model_path,
        served_model_name=ns.served_model_name or ns.model_path,
        tp_size=max(1, ns.tp_size),
        host=ns.host,
        port=ns.port,
        speculative_algorithm=algo,
        speculative_draft_model_path=ns.speculative_draft_model_path,
        speculative_num_steps=steps if algo else None,
        speculative_eagle_topk=topk if algo else None,
        speculative_num_draft_tokens=draft if algo else None,
        cuda_graph_max_bs=graph_bs,
        max_running_requests=max_running,
        context_length=ns.context_length or ns.max_model_len,
        enable_metrics=bool(ns.enable_metrics),
        disable_overlap_schedule=disable_overlap,
        skip_server_warmup=bool(ns.skip_server_warmup),
        decode_log_interval=max(1, ns.decode_log_interval),
        spec_v2=spec_v2,
        time_scale=ns.sim_time_scale,
        speed=ns.sim_speed,
        seed=ns.sim_seed if ns.random_seed is None else ns.random_seed,
        log_style=ns.sim_log_style,
        disable_spec_above=ns.sim_disable_spec_above,
        exit_with=ns.sim_exit_with,
        request_log=ns.sim_request_log,
        memory_saver=bool(ns.enable_memory_saver),
        weights_cpu_backup=bool(ns.enable_weights_cpu_backup),
        draft_weights_cpu_backup=bool(ns.enable_draft_weights_cpu_backup),
        h2d_gbps=ns.sim_h2d_gbps,
        faults=faults,
        torch_compile_max_bs=ns.torch_compile_max_bs if ns.enable_torch_compile else None,
        compile_cache_dir=(env.get("VLLM_CACHE_ROOT") if vllm else env.get("TORCHINDUCTOR_CACHE_DIR")) or None,
        unknown_flags=unknown,
        nnodes=ns.nnodes,
        node_rank=ns.node_rank,
        dist_init_addr=ns.dist_init_addr,
        sleep_mode=bool(ns.enable_sleep_mode),
        sleep_endpoints=bool(ns.enable_sleep_mode) and env.get("VLLM_SERVER_DEV_MODE", "") == "1",
    )
    return config, warnings


def _vllm_spec(text: str) -> tuple[str, str | None, int]:
    """vLLM's `--speculative-config` JSON -> (algorithm, draft model, speculative tokens)."""
    try:
        spec = json.loads(text)
    except ValueError as exc:
        raise UsageError(f"--speculative-config is not JSON: {exc}") from None
    if not isinstance(spec, dict):
        raise UsageError("--speculative-config must be a JSON object")
    method = str(spec.get("method", "")).lower()
    if method not in VLLM_METHODS:
        raise UsageError(f"--speculative-config method {method!r}: the simulator knows {', '.join(VLLM_METHODS)}")
    model = spec.get("model")
    if method != "ngram" and not model:
        raise UsageError(f"--speculative-config method {method!r} needs a draft model")
    tokens = spec.get("num_speculative_tokens")
    if not isinstance(tokens, int) or not 1 <= tokens <= 64:
        raise UsageError("--speculative-config needs num_speculative_tokens between 1 and 64")
    return VLLM_METHODS[method], None if model is None else str(model), tokens
