"""`/metrics`: Prometheus text with SGLang's names (engines.md 4.1), rendered by hand (no client library).

Gauges come from the scheduler's snapshot taken at each `Decode batch` line (SGLang updates them only
then); counters and histograms grow when a request finishes.
"""

from __future__ import annotations

from specdash.sim.args import SimConfig
from specdash.sim.scheduler import Scheduler

TTFT_BUCKETS = (0.1, 0.25, 0.5, 0.75, 1.0, 2.0, 4.0, 6.0, 8.0, 10.0, 20.0, 40.0, 60.0, 80.0, 120.0, 160.0)
E2E_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 40.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0)


def _labels(pairs: dict[str, str]) -> str:
    return "{" + ",".join(f'{k}="{v}"' for k, v in sorted(pairs.items())) + "}"


def _histogram(
    name: str, help_text: str, labels: dict[str, str], samples: list[float], buckets: tuple[float, ...]
) -> list[str]:
    out = [f"# HELP {name} {help_text}", f"# TYPE {name} histogram"]
    for bound in buckets:
        count = sum(1 for s in samples if s <= bound)
        out.append(f"{name}_bucket{_labels({**labels, 'le': str(bound)})} {float(count)}")
    out.append(f"{name}_bucket{_labels({**labels, 'le': '+Inf'})} {float(len(samples))}")
    out.append(f"{name}_count{_labels(labels)} {float(len(samples))}")
    out.append(f"{name}_sum{_labels(labels)} {float(sum(samples))}")
    return out


def render_metrics(config: SimConfig, sched: Scheduler) -> str:
    """The whole exposition text."""
    model = {"model_name": config.served_model_name}
    sched_labels = {**model, "engine_type": "unified", "tp_rank": "0", "pp_rank": "0"}
    g, c = sched.gauges, sched.counters
    gauges = [
        ("sglang:num_running_reqs", "The number of running requests.", g.num_running_reqs),
        ("sglang:num_used_tokens", "The number of used tokens.", g.num_used_tokens),
        ("sglang:token_usage", "The token usage.", g.token_usage),
        ("sglang:gen_throughput", "The generation throughput (token/s).", g.gen_throughput),
        ("sglang:num_queue_reqs", "The number of requests in the waiting queue.", g.num_queue_reqs),
        ("sglang:cache_hit_rate", "The prefix cache hit rate.", 0.0),
        ("sglang:max_total_num_tokens", "Maximum total number of tokens in the KV cache pool.", sched.kv_tokens),
        ("sglang:utilization", "The utilization.", min(1.0, g.num_running_reqs / max(1, sched.model.max_running))),
        ("sglang:is_cuda_graph", "Whether the batch is using CUDA graph.", g.is_cuda_graph),
        ("sglang:spec_accept_length", "The average acceptance length of speculative decoding.", g.spec_accept_length),
        ("sglang:spec_accept_rate", "The average acceptance rate of speculative decoding.", g.spec_accept_rate),
        ("sglang:num_retracted_reqs", "The number of retracted requests.", 0),
    ]
    lines: list[str] = []
    for name, help_text, value in gauges:
        lines += [f"# HELP {name} {help_text}", f"# TYPE {name} gauge", f"{name}{_labels(sched_labels)} {float(value)}"]
    counters = [
        ("sglang:prompt_tokens_total", "Number of prefill tokens processed.", c.prompt_tokens),
        ("sglang:generation_tokens_total", "Number of generation tokens processed.", c.generation_tokens),
        ("sglang:num_requests_total", "Number of requests processed.", c.num_requests),
    ]
    for name, help_text, value in counters:
        lines += [f"# HELP {name} {help_text}", f"# TYPE {name} counter", f"{name}{_labels(model)} {float(value)}"]
    lines += _histogram(
        "sglang:time_to_first_token_seconds",
        "Histogram of time to first token in seconds.",
        model,
        c.ttft,
        TTFT_BUCKETS,
    )
    lines += _histogram(
        "sglang:e2e_request_latency_seconds",
        "Histogram of End-to-end request latency in seconds",
        model,
        c.e2e,
        E2E_BUCKETS,
    )
    return "\n".join(lines) + "\n"
