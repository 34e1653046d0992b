"""Each `--sim-fault` produces SGLang's own text and exit, and the bad-flag paths behave like SGLang."""

from __future__ import annotations

import asyncio
import socket

import aiohttp
import pytest

from tests.support.sim_harness import READY, Simulators, probe_health, stream_generate

KIMI = ("--model-path", "/models/kimi", "--tp", "2")


async def test_crash_at_batch_in_dynamic_mode(sim: Simulators) -> None:
    proc = await sim(
        *KIMI, "--speculative-algorithm", "EAGLE3", "--sim-disable-spec-above", "4", "--sim-fault", "crash-at-batch=4"
    )
    port = proc.port
    await proc.wait_for(READY, 20)
    async with aiohttp.ClientSession() as s:
        streams = [asyncio.ensure_future(stream_generate(s, port, 400)) for _ in range(6)]
        await proc.wait_for(r"TP0\] Scheduler hit an exception: Traceback \(most recent call last\):", 10)
        await proc.wait_for(r"^RuntimeError: The size of tensor a \(160\) must match the size of tensor b \(2\)", 5)
        await proc.wait_for(r"Received sigquit from a child process\. It usually means the child failed\.", 5)
        assert await proc.wait_exit(5) == -9, "kill_process_tree SIGKILLs the launcher itself"
        results = await asyncio.gather(*streams, return_exceptions=True)
    assert all(isinstance(r, Exception) for r in results), "streams are cut, not completed"
    await proc.wait_gone()


async def test_crash_2026_wording(sim: Simulators) -> None:
    proc = await sim(*KIMI, "--speculative-algorithm", "EAGLE3", "--sim-fault", "crash-at-batch=1",
                           "--sim-log-style", "sglang-2026")  # fmt: skip
    port = proc.port
    await proc.wait_for(READY, 20)
    async with aiohttp.ClientSession() as s:
        streams = [asyncio.ensure_future(stream_generate(s, port, 100)) for _ in range(2)]
        await proc.wait_for(r"SIGQUIT received\. signum=None, frame=None\. It usually means one child failed\.", 10)
        await asyncio.gather(*streams, return_exceptions=True)
    assert await proc.wait_exit(5) == -9


async def test_oom_at_capture(sim: Simulators) -> None:
    proc = await sim(*KIMI, "--sim-fault", "oom-at-capture")
    port = proc.port
    await proc.wait_for(r"TP0\] Capture cuda graph begin\.", 15)
    await proc.wait_for(r"TP0\] Scheduler hit an exception: Traceback", 10)
    await proc.wait_for(r"^Exception: Capture cuda graph failed: CUDA out of memory\.", 5)
    await proc.wait_for(r"^Possible solutions:", 5)
    await proc.wait_for(r"^2\. set --cuda-graph-max-bs to a smaller value \(e\.g\., 16\)", 5)
    await proc.wait_for("Received sigquit from a child process", 5)
    assert await proc.wait_exit(5) == -9
    assert not any("Uvicorn running" in line for line in proc.lines)
    await proc.wait_gone()
    assert await probe_health(port) is None


async def test_port_in_use_fails_only_after_the_full_load(sim: Simulators) -> None:
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    port = holder.getsockname()[1]
    try:
        proc = await sim(*KIMI, "--speculative-algorithm", "EAGLE3", port=port)
        await proc.wait_for(r"Capture draft extend cuda graph end", 20)
        await proc.wait_for(r"max_total_num_tokens=", 5)
        await proc.wait_for(r"INFO:     Application startup complete\.", 5)
        await proc.wait_for(
            rf"ERROR:    \[Errno 98\] error while attempting to bind on address \('127\.0\.0\.1', {port}\): "
            r"address already in use$",
            5,
        )
        await proc.wait_for(r"INFO:     Waiting for application shutdown\.", 5)
        assert await proc.wait_exit(5) == 1
        await proc.wait_gone()
    finally:
        holder.close()


async def test_port_in_use_fault_without_a_holder(sim: Simulators) -> None:
    proc = await sim(*KIMI, "--sim-fault", "port-in-use")
    port = proc.port
    await proc.wait_for(rf"\[Errno 98\] error while attempting to bind on address \('127\.0\.0\.1', {port}\)", 20)
    assert await proc.wait_exit(5) == 1


async def test_warmup_fail(sim: Simulators) -> None:
    proc = await sim(*KIMI, "--sim-fault", "warmup-fail")
    await proc.wait_for(r"Uvicorn running on", 20)
    await proc.wait_for(r"\] Initialization failed\. warmup error: Traceback \(most recent call last\):", 10)
    await proc.wait_for(r"^AssertionError: res=<Response \[502\]>, res\.text=''", 5)
    assert await proc.wait_exit(5) == -9
    assert not any("fired up" in line for line in proc.lines)
    await proc.wait_gone()


async def test_hang_at_weights_stays_refused(sim: Simulators) -> None:
    proc = await sim(*KIMI, "--sim-fault", "hang-at=weights")
    port = proc.port
    await proc.wait_for(r"TP0\] Load weight begin\.", 15)
    with pytest.raises(TimeoutError):
        await proc.wait_for(r"Load weight end", 1.0)
    assert proc.proc is not None and proc.proc.returncode is None
    assert await probe_health(port) is None


async def test_hang_at_warmup_stays_503(sim: Simulators) -> None:
    proc = await sim(*KIMI, "--sim-fault", "hang-at=warmup")
    port = proc.port
    await proc.wait_for(r'"GET /get_model_info HTTP/1\.1" 200 OK', 20)
    for _ in range(5):
        assert await probe_health(port) == 503
    assert not any("fired up" in line for line in proc.lines)


async def test_slow_health(sim: Simulators) -> None:
    proc = await sim(*KIMI, "--sim-fault", "slow-health=0.4")
    port = proc.port
    await proc.wait_for(READY, 20)
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    assert await probe_health(port, timeout=5) == 200
    assert loop.time() - t0 >= 0.4


async def test_partial_spec_params_assert_like_sglang(sim: Simulators) -> None:
    proc = await sim(*KIMI, "--speculative-algorithm", "EAGLE3", "--speculative-num-steps", "3")
    assert await proc.wait_exit(10) == 1
    await proc.wait_for(r"^AssertionError$", 2)
    assert "in _handle_speculative_decoding" in proc.raw


async def test_unknown_sglang_flags_are_logged_not_fatal(sim: Simulators) -> None:
    proc = await sim(*KIMI, "--mem-fraction-static", "0.8", "--trust-remote-code", "--attention-backend", "fa3")
    port = proc.port
    await proc.wait_for("ignoring SGLang flags it does not simulate: --mem-fraction-static 0.8 --trust-remote-code", 10)
    await proc.wait_for(READY, 20)
    assert await probe_health(port) == 200


async def test_unknown_sim_flag_is_a_usage_error(sim: Simulators) -> None:
    proc = await sim(*KIMI, "--sim-no-such-thing")
    assert await proc.wait_exit(10) == 2
    await proc.wait_for("unrecognized simulator flag: --sim-no-such-thing", 2)
