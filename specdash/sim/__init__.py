"""A faithful SGLang stand-in: same flags, log lines and endpoints, a calibrated batch-scheduler model; with
`--sim-log-style vllm-0.24`, a vLLM 0.24 one (its log wording, `--speculative-config`, sleep mode, metrics).

Usage (the real launch command with the launcher swapped)::

    specdash sim --model-path /models/kimi --tp 8 --speculative-algorithm EAGLE3 --sim-time-scale 0.05

Simulator-only flags start with `--sim-`: `--sim-time-scale` (startup and shutdown durations; 1.0 = the
real ~550 s for TP=8 EAGLE-3, the demo uses 0.05), `--sim-speed` (divides decode step times; stress tests
only), `--sim-seed`, `--sim-log-style {sglang-0.5,sglang-2026,vllm-0.24}`, `--sim-fault` (repeatable, see `faults`)
and `--sim-disable-spec-above N` (speculate only while the running batch is at most N).

Decision: the time scale does not touch decode timing. Token rates are the point of the demo and of every
measurement against the simulator, so they stay real (calibrated, see `model`) at any time scale; only
`--sim-speed` changes them, explicitly.

Modules:
- `args`: flags and SGLang's post-processing (NEXTN -> EAGLE, all-or-none draft params, 48-request cap).
- `presets`: what the model looks like on the GPUs (shards, memory, phase durations).
- `startup`: the per-rank startup script; `ranks`: the TP child processes that run it.
- `logstyle`: SGLang's line formats in both wordings; `faults`: fault options and failure texts.
- `model`: the throughput model (calibration table); `scheduler`: the discrete-step batch scheduler.
- `server`: the aiohttp routes; `metrics`: `/metrics`; `app`: the main process (signals, warmup).
- `vllm_log`: vLLM 0.24's line format and startup script (compile and its cache, the silent seconds);
  `vllm_api`: its sleep mode on the simulated GPUs, `/metrics` names and stats-logger lines.
"""
