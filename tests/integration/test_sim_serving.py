"""The simulator serves like SGLang: routes and bodies, exact token counts, and calibrated throughput."""

from __future__ import annotations

import asyncio
import json
import re
import time
from pathlib import Path

import aiohttp
import pytest

from specdash.sim.model import baseline_model, eagle3_model
from specdash.sim.spec_space import CALIBRATION_FLAGS
from tests.support.eventually import eventually
from tests.support.sim_harness import (
    Simulators,
    StreamRecord,
    steady_rate,
    stream_completion,
    stream_generate,
)

SEED = ("--sim-seed", "7")  # the same sampled acceptance run to run
# The draft parameters `eagle3_model()` is calibrated at (the seed's 2, 4, 16): without them the simulator
# takes SGLang's own defaults for EAGLE-3 (3, 1, 4), another tree whose throughput that model does not describe.
BASELINE = (*SEED, "--model-path", "/models/kimi", "--tp", "2")
EAGLE3 = (*BASELINE, "--speculative-algorithm", "EAGLE3", *CALIBRATION_FLAGS)


async def test_generate_stream_counts_and_spec_meta(sim: Simulators) -> None:
    proc = await sim(*EAGLE3, "--enable-metrics", ready=30)
    port = proc.port
    async with aiohttp.ClientSession() as s:
        rec = await stream_generate(s, port, 37)
        assert rec.final_tokens == 37
        assert len(rec.events) < 37, "speculative chunks carry several tokens"
        assert rec.meta["finish_reason"] == {"type": "length", "length": 37}
        verify = rec.meta["spec_verify_ct"]
        assert isinstance(verify, int) and verify > 0
        assert rec.meta["spec_accept_length"] == pytest.approx(37 / verify)
        cumulative = [n for _, n in rec.events]
        assert cumulative == sorted(cumulative)
        # Non-streaming, with cumulative text of one word per token.
        async with s.post(
            f"http://127.0.0.1:{port}/generate",
            json={"text": "hi", "sampling_params": {"max_new_tokens": 9, "ignore_eos": True}},
        ) as resp:
            body = await resp.json()
        assert body["meta_info"]["completion_tokens"] == 9 and len(body["text"].split()) == 9
        async with s.get(f"http://127.0.0.1:{port}/server_info") as resp:
            info = await resp.json()
        assert info["internal_states"][0]["avg_spec_accept_length"] > 1.5
        assert info["max_running_requests"] == 48 and info["speculative_algorithm"] == "EAGLE3"
        async with s.get(f"http://127.0.0.1:{port}/metrics") as resp:
            metrics = await resp.text()
        # Warmup's request counts too, as in SGLang: 8 tokens (or fewer on an early stop) plus ours.
        m = re.search(r'sglang:generation_tokens_total\{model_name="/models/kimi"\} ([\d.]+)', metrics)
        assert m and 46 < float(m.group(1)) <= 54
        assert 'sglang:num_requests_total{model_name="/models/kimi"} 3.0' in metrics
        assert "sglang:spec_accept_length{" in metrics and "sglang:num_running_reqs{" in metrics
    await proc.wait_for(r'"POST /generate HTTP/1\.1" 200 OK', 5)


@pytest.mark.parametrize("chat", [False, True])
async def test_openai_stream_usage_chunk_and_non_stream(sim: Simulators, chat: bool) -> None:
    port = (await sim(*EAGLE3, ready=30)).port
    route = "/v1/chat/completions" if chat else "/v1/completions"
    async with aiohttp.ClientSession() as s:
        rec = await stream_completion(s, port, 50, chat=chat)
        assert rec.final_tokens == 50
        payload: dict[str, object] = {"max_tokens": 50, "ignore_eos": True, "stream": True,
                                      "stream_options": {"include_usage": True}}  # fmt: skip
        payload.update({"messages": [{"role": "user", "content": "x"}]} if chat else {"prompt": "x"})
        async with s.post(f"http://127.0.0.1:{port}{route}", json=payload) as resp:
            raw = (await resp.read()).decode()
        events = [e[len("data: ") :] for e in raw.split("\n\n") if e.startswith("data: ")]
        assert events[-1] == "[DONE]"
        usage = json.loads(events[-2])
        assert usage["choices"] == [] and usage["usage"]["completion_tokens"] == 50
        last = json.loads(events[-3])
        assert last["choices"][0]["finish_reason"] == "length"
        payload["stream"] = False
        async with s.post(f"http://127.0.0.1:{port}{route}", json=payload) as resp:
            body = await resp.json()
        assert body["usage"]["completion_tokens"] == 50
        assert body["object"] == ("chat.completion" if chat else "text_completion")


async def test_info_routes_and_flush(sim: Simulators) -> None:
    proc = await sim(*BASELINE, ready=30)
    port = proc.port
    base = f"http://127.0.0.1:{port}"
    async with aiohttp.ClientSession() as s:
        async with s.get(f"{base}/v1/models") as resp:
            models = await resp.json()
        assert models["data"][0]["id"] == "/models/kimi" and models["data"][0]["owned_by"] == "sglang"
        for path in ("/model_info", "/get_model_info"):
            async with s.get(base + path) as resp:
                info = await resp.json()
            assert info["model_path"] == "/models/kimi" and info["is_generation"] is True
        async with s.get(f"{base}/get_server_info") as resp:
            server = await resp.json()
        assert "avg_spec_accept_length" not in server["internal_states"][0]
        assert "last_gen_throughput" in server["internal_states"][0]
        async with s.post(f"{base}/flush_cache") as resp:
            assert resp.status == 200 and (await resp.text()).startswith("Cache flushed.")
        async with s.get(f"{base}/metrics") as resp:
            assert resp.status == 404, "/metrics is only routed with --enable-metrics"
        async with s.get(f"{base}/health_generate") as resp:
            assert resp.status == 200
        async with s.post(f"{base}/generate", data=b"not json") as resp:
            assert resp.status == 400 and "error" in await resp.json()
    await proc.wait_for("Endpoint '/get_server_info' is deprecated", 5, from_start=True)
    await proc.wait_for(r"Prefill batch, #new-seq: 1, #new-token: 1, ", 5, from_start=True)


async def test_without_ignore_eos_some_requests_stop_early(sim: Simulators) -> None:
    port = (await sim(*BASELINE, "--sim-speed", "20", ready=30)).port
    async with aiohttp.ClientSession() as s:
        # Distinct prompts: at temperature 0 a prompt's natural end is part of its greedy text (the same each time).
        recs = await asyncio.gather(
            *(
                stream_generate(s, port, 600, ignore_eos=False, text=f"Tell me about speculation, take {i}.")
                for i in range(12)
            )
        )
        again = await stream_generate(s, port, 600, ignore_eos=False, text="Tell me about speculation, take 0.")
    assert again.final_tokens == recs[0].final_tokens  # the same greedy prompt ends at the same token
    reasons = {str(r.meta["finish_reason"]) for r in recs}
    assert any("'stop'" in reason for reason in reasons)
    for r in recs:
        reason = r.meta["finish_reason"]
        assert isinstance(reason, dict)
        assert r.final_tokens == (600 if reason["type"] == "length" else r.final_tokens)


@pytest.mark.parametrize(
    ("mode", "concurrency", "max_new"),
    [("baseline", 1, 230), ("baseline", 64, 56), ("eagle3", 1, 280), ("eagle3", 64, 52)],
)
async def test_aggregate_throughput_matches_model(sim: Simulators, mode: str, concurrency: int, max_new: int) -> None:
    args = BASELINE if mode == "baseline" else EAGLE3
    model = baseline_model() if mode == "baseline" else eagle3_model()
    port = (await sim(*args, ready=30)).port
    records: list[StreamRecord] = []
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as s:
        # Collect events live so that streams cancelled at the end still count.
        tasks = [asyncio.ensure_future(_live(s, port, max_new, records)) for _ in range(concurrency)]
        done, pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        for t in pending:
            t.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
    running = [r for r in records if r.events]
    start = max(r.events[0][0] for r in running if r.events[0][0] < min(x.events[-1][0] for x in running)) + 0.3
    end = min(r.events[-1][0] for r in running if r.final_tokens == max_new) - 0.05
    assert end - start > 2.0, (start, end)
    measured = steady_rate(running, start, end)
    target = model.expected_aggregate(concurrency)
    print(f"{mode} C={concurrency}: measured {measured:.1f} tok/s, model {target:.1f} tok/s")
    assert measured == pytest.approx(target, rel=0.05), (measured, target)


async def _live(s: aiohttp.ClientSession, port: int, max_new: int, records: list[StreamRecord]) -> None:
    """Like stream_generate, but the record is visible (in `records`) while the stream runs."""
    rec = StreamRecord()
    records.append(rec)
    body = {"text": "x", "sampling_params": {"max_new_tokens": max_new, "ignore_eos": True}, "stream": True}
    loop = asyncio.get_running_loop()
    async with s.post(f"http://127.0.0.1:{port}/generate", json=body) as resp:
        async for raw in resp.content:
            if raw.startswith(b"data: {"):
                n = int(json.loads(raw[6:])["meta_info"]["completion_tokens"])
                rec.events.append((loop.time(), n))
                rec.final_tokens = n


@pytest.mark.parametrize("style", ["sglang-0.5", "sglang-2026"])
async def test_decode_batch_lines_every_40_steps(sim: Simulators, style: str) -> None:
    proc = await sim(*EAGLE3, "--sim-speed", "10", "--sim-log-style", style, ready=30)
    port = proc.port
    async with aiohttp.ClientSession() as s:
        rec = await stream_generate(s, port, 400)
    verify = rec.meta["spec_verify_ct"]
    assert isinstance(verify, int)
    end = ", $" if style == "sglang-0.5" else r"$"
    pattern = (
        r"TP0\] Decode batch, #running-req: 1, #token: \d+, token usage: 0\.00, accept len: ([\d.]+), "
        r"accept rate: [\d.]+, cuda graph: True, gen throughput \(token/s\): ([\d.]+), #queue-req: 0" + end
    )
    lines = [m for line in proc.lines if (m := re.search(pattern, line))]
    # One line per 40 decode steps; warmup's few steps (at most 7) count towards the first interval.
    assert verify // 40 <= len(lines) <= (verify + 7) // 40
    for m in lines[1:]:  # the first interval starts before the request (idle), as in SGLang
        assert 1.5 < float(m.group(1)) < 3.0
        assert float(m.group(2)) == pytest.approx(82.0 * 10, rel=0.25)


@pytest.mark.exclusive_cpu
async def test_256_concurrent_streams_keep_timing_within_2_percent(sim: Simulators) -> None:
    """One simulator process, 256 live SSE streams: the measured rate stays within 2 % of the model. A timing bound
    that needs the machine: beside five other workers and two CPU hogs the streams' common window shrank to 0.5 s
    (ci31), the client reading 256 streams as starved as the simulator."""
    port = (await sim(*BASELINE, ready=30)).port
    records: list[StreamRecord] = []
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as s:
        tasks = [asyncio.ensure_future(_live(s, port, 16, records)) for _ in range(256)]
        await asyncio.gather(*tasks)
    assert all(r.final_tokens == 16 for r in records)
    start = max(r.events[0][0] for r in records) + 0.3
    end = min(r.events[-1][0] for r in records) - 0.05
    assert end - start > 2.5, (start, end)
    measured = steady_rate(records, start, end)
    target = baseline_model().expected_aggregate(256)
    print(f"256 streams: measured {measured:.1f} tok/s, model {target:.1f} tok/s")
    assert measured == pytest.approx(target, rel=0.02), (measured, target)


async def test_the_request_log_stamps_a_request_where_its_first_bytes_arrived(sim: Simulators, tmp_path: Path) -> None:
    """`received` is when a request's first bytes were read, not when its handler ran: headers sent, then the
    body after a pause, gives a `received` a pause before `created`. The next request on the same keep-alive
    connection gets its own stamp (not the connection's first), and so does one after a `/health` on it."""
    log = tmp_path / "requests.jsonl"
    port = (await sim(*BASELINE, "--sim-request-log", str(log), ready=30)).port
    pause = 0.3

    def post(n: int) -> tuple[bytes, bytes]:
        sampling = {"max_new_tokens": n, "ignore_eos": True}
        body = json.dumps({"text": "hi", "sampling_params": sampling, "stream": True}).encode()
        head = f"POST /generate HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n\r\n"
        return head.encode(), body

    async def stream(reader: asyncio.StreamReader) -> dict[str, object]:
        """The last event of a chunked SSE answer, read to the end of its body."""
        data = await reader.readuntil(b"data: [DONE]\n\n")
        await reader.readuntil(b"0\r\n\r\n")
        events = re.findall(rb"data: (\{.*\})\n", data)
        return json.loads(events[-1])["meta_info"]  # type: ignore[no-any-return]

    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        head, body = post(3)
        writer.write(head)
        await writer.drain()
        await asyncio.sleep(pause)  # the point of the test: the body comes later than the headers
        writer.write(body)
        assert (await stream(reader))["completion_tokens"] == 3
        writer.write(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        head = await reader.readuntil(b"\r\n\r\n")
        length = re.search(rb"Content-Length: (\d+)", head, re.I)
        assert head.startswith(b"HTTP/1.1 200") and length, head
        await reader.readexactly(int(length.group(1)))
        between = time.monotonic()
        writer.write(b"".join(post(4)))
        assert (await stream(reader))["completion_tokens"] == 4
    finally:
        writer.close()
    records = await eventually(lambda: [json.loads(x) for x in log.read_text().splitlines()],
                               until=lambda r: sum(x["tokens"] in (3, 4) for x in r) == 2, timeout=10,
                               what="both requests in the log")  # fmt: skip
    first, second = (next(x for x in records if x["tokens"] == n) for n in (3, 4))
    assert first["created"] - first["received"] >= pause * 0.9, first
    assert second["received"] > between > first["finished"], (first, second)
    assert 0 <= second["created"] - second["received"] < pause / 2, second
    assert first["first"] <= first["first_sent"] and second["first"] <= second["first_sent"]
