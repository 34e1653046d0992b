"""Resident modes, the pure parts: the config refuses what cannot sleep, the launch gets the engine's sleep
flags, and the rules a switch applies (memory released, accept length, memory plan, the one-line report)."""

from __future__ import annotations

from pathlib import Path

import pytest

from specdash import config
from specdash.config import HostConfig
from specdash.core.resident import (
    ACCEPT_TOLERANCE,
    RELEASED_FLOOR_MIB,
    ServerNeed,
    SwitchOutcome,
    check_accept,
    plan_memory,
    released,
    weights_mib,
)
from specdash.engines.registry import names, resident_refusal
from specdash.errors import UsageError
from specdash.server.launch import launch_argv, launch_env
from specdash.sim.faults import parse_faults

P = Path("/cfg/config.toml")


def parse(text: str) -> config.Config:
    return config.parse(text, P, engines=names(), residency=resident_refusal)


VLLM_EAGLE = """
[modes.eagle]
engine = "vllm"
model = "/m"
port = 8001
resident = true
args = ["--speculative-config", '{"method": "eagle3", "model": "/d", "num_speculative_tokens": 3}']
"""


def test_a_resident_vllm_mode_is_launched_with_sleep_mode_and_the_dev_endpoints() -> None:
    cfg = parse(VLLM_EAGLE)
    mode = cfg.mode("eagle")
    assert mode.resident and mode.sleep_level == 1
    argv = launch_argv(mode, HostConfig(name="h", address="h"))
    assert argv.count("--enable-sleep-mode") == 1
    assert launch_env(mode, HostConfig(name="h", address="h"))["VLLM_SERVER_DEV_MODE"] == "1"


def test_a_resident_sglang_mode_with_a_draft_gets_the_memory_saver_and_both_weight_backups() -> None:
    cfg = parse(
        '[modes.e]\nengine = "sglang"\nmodel = "/m"\nresident = true\n'
        'args = ["--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "/d",'
        ' "--enable-memory-saver"]\n'
    )
    argv = launch_argv(cfg.mode("e"), HostConfig(name="h", address="h"))
    for flag in ("--enable-memory-saver", "--enable-weights-cpu-backup", "--enable-draft-weights-cpu-backup"):
        assert argv.count(flag) == 1, flag  # added once, never repeated when the user gave it


def test_a_mode_that_is_not_resident_launches_unchanged() -> None:
    cfg = parse('[modes.b]\nengine = "vllm"\nmodel = "/m"\n')
    assert "--enable-sleep-mode" not in launch_argv(cfg.mode("b"), HostConfig(name="h", address="h"))
    assert "VLLM_SERVER_DEV_MODE" not in launch_env(cfg.mode("b"), HostConfig(name="h", address="h"))


def test_level_2_is_refused_for_a_speculative_mode_with_the_reason() -> None:
    with pytest.raises(UsageError) as err:
        parse(VLLM_EAGLE + "sleep_level = 2\n")
    message = err.value.message
    assert message.startswith(f"{P}: [modes.eagle] resident: refused: sleep level 2 discards the draft")
    assert "acceptance drops to 0" in message


def test_level_2_is_allowed_for_a_plain_mode() -> None:
    cfg = parse('[modes.b]\nengine = "vllm"\nmodel = "/m"\nresident = true\nsleep_level = 2\n')
    assert cfg.mode("b").sleep_level == 2


@pytest.mark.parametrize("level", ["3", "0", "1.5", '"1"'])
def test_a_bad_sleep_level_names_the_key(level: str) -> None:
    with pytest.raises(UsageError, match=r"\[modes.b\] sleep_level: "):
        parse(f'[modes.b]\nengine = "vllm"\nmodel = "/m"\nresident = true\nsleep_level = {level}\n')


def test_a_resident_mode_needs_a_port_of_its_own() -> None:
    with pytest.raises(UsageError) as err:
        parse(
            '[modes.a]\nengine = "vllm"\nmodel = "/m"\nport = 8000\nresident = true\n'
            '[modes.b]\nengine = "vllm"\nmodel = "/n"\nport = 8000\n'
        )
    assert "[modes.a] port: 8000 is also [modes.b]'s" in err.value.message


def test_resident_is_not_inherited_by_extends() -> None:
    cfg = parse(VLLM_EAGLE + '[modes.child]\nextends = "eagle"\nport = 8002\n')
    assert cfg.mode("eagle").resident and not cfg.mode("child").resident


def test_an_engine_without_sleep_support_is_refused() -> None:
    assert resident_refusal("anything", (), 1) == (
        "anything has no sleep/wake endpoints specdash knows, so its servers cannot stay resident"
    )


def test_memory_counts_as_released_per_gpu_and_the_evidence_names_each_gpu() -> None:
    before = {0: 45144.0, 1: 45144.0, 2: 1.0}
    ok = released(before, {0: 568.0, 1: 568.0, 2: 1.0})
    assert ok.ok and ok.evidence == "GPU0 45144 -> 568 MiB, GPU1 45144 -> 568 MiB"  # GPU2 was never used
    held = released(before, {0: 568.0, 1: 45000.0})
    assert not held.ok and "GPU1 45144 -> 45000 MiB" in held.evidence
    assert released({0: 10_000.0}, {0: RELEASED_FLOOR_MIB}).ok  # a context's worth stays


def test_the_accept_length_check_has_a_relative_and_an_absolute_tolerance() -> None:
    assert check_accept(2.0, 2.0 * (1 - ACCEPT_TOLERANCE) + 0.01).ok
    assert not check_accept(2.4, 1.0).ok  # a lost drafter
    assert check_accept(0.5, 0.65).ok  # the absolute floor for small figures
    assert "accept length 1.00 (before sleep 2.40" in check_accept(2.4, 1.0).text


def test_the_memory_plan_refuses_with_the_numbers() -> None:
    a = ServerNeed("base", awake_mib=70_000, asleep_mib=1_300, host_ram_mib=15_000, measured=True)
    b = ServerNeed("eagle", awake_mib=72_000, asleep_mib=2_000, host_ram_mib=16_000)
    fits = plan_memory([a, b], gpu_total_mib=81_559, host_available_mib=200_000)
    assert fits.fits and fits.lines[0] == "memory plan: the resident servers fit"
    assert "eagle awake 70.3 GiB + base asleep 1.3 GiB = 71.6 of 79.6 GiB per GPU: fits" in fits.lines
    big = ServerNeed("big", awake_mib=81_000, asleep_mib=4_000, host_ram_mib=150_000)
    refused = plan_memory([a, big], gpu_total_mib=81_559, host_available_mib=100_000)
    assert not refused.fits and refused.lines[0] == "memory plan: the resident servers do not fit"
    assert "big awake 79.1 GiB + base asleep 1.3 GiB = 80.4 of 79.6 GiB per GPU: does not fit" in refused.lines
    assert "base awake 68.4 GiB + big asleep 3.9 GiB (est.) = 72.3 of 79.6 GiB per GPU: fits" in refused.lines
    assert "host RAM for sleeping weights 146.5 GiB of 97.7 GiB available (at most 90%): does not fit" in refused.lines


def test_weights_size_from_a_start_log_sums_the_ranks() -> None:
    log = (
        "[2025-12-20 10:00:20 TP0] Load weight end. type=DeepseekV3ForCausalLM, dtype=torch.bfloat16, "
        "avail mem=60.1 GB, mem usage=72.43 GB.\n"
        "[2025-12-20 10:00:20 TP1] Load weight end. type=DeepseekV3ForCausalLM, dtype=torch.bfloat16, "
        "avail mem=60.1 GB, mem usage=72.43 GB.\n"
    )
    assert weights_mib(log) == pytest.approx(2 * 72.43 * 1024)
    draft = (
        "[2025-12-20 10:00:43 TP0] Load weight end. type=LlamaForCausalLMEagle3, avail mem=14 GB, mem usage=2.10 GB.\n"
    )
    assert weights_mib(log + draft) == pytest.approx((2 * 72.43 + 2.10) * 1024)  # the draft's weights count too
    assert weights_mib("nothing here") is None


def test_the_switch_line() -> None:
    woken = SwitchOutcome("eagle3", True, 6.2, 8, 8, 2.1, restart_s=550.0)
    assert woken.text == (
        "switched to eagle3 in 6.2 s (verified 8/8 identical, accept length 2.1); a restart takes 9m 10s here"
    )
    fell = SwitchOutcome("eagle3", False, 1.0, why_restart="POST /wake_up answered 500: oom")
    assert fell.text == "restarting eagle3: POST /wake_up answered 500: oom"


def test_the_simulator_knows_every_sleep_and_wake_fault() -> None:
    faults = parse_faults(["wake-hangs", "wake-corrupts", "sleep-holds-memory", "sleep-500", "wake-404", "wake-500"])
    assert faults.wake_hangs and faults.wake_corrupts and faults.sleep_holds_memory
    assert faults.sleep_500 and faults.wake_404 and faults.wake_500
    with pytest.raises(UsageError, match="wake-hangs"):
        parse_faults(["wake-hangs=3"])
