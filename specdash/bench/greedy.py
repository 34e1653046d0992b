"""Fetch greedy (temperature 0) outputs of N prompts from one server, for `core.greedy.compare_outputs`.

Non-streaming requests, one at a time (the check is about text, not speed; a batch of one also keeps batched
verification numerics out of the comparison unless the engine itself is batch-variant).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Sequence

import httpx

from specdash.bench.sse import Endpoint
from specdash.errors import SpecdashError
from specdash.safetext import escape_controls


def chosen_prompts(prompts: Sequence[str], n: int) -> list[str]:
    """The first `n` prompts of the set, cycling when it has fewer (the prompts every mode answers)."""
    return [prompts[i % len(prompts)] for i in range(n)]


def workload_key(prompts: Sequence[str], endpoint: Endpoint, output_len: int, model: str | None = None) -> str:
    """A fingerprint of what the outputs answer (the prompt texts, endpoint, output length, model name): stored
    outputs compare only with outputs of the same key."""
    text = json.dumps([list(prompts), endpoint.value, output_len, model or ""])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


async def greedy_outputs(
    base_url: str,
    prompts: Sequence[str],
    *,
    endpoint: Endpoint = Endpoint.GENERATE,
    output_len: int = 64,
    model: str | None = None,
    timeout_s: float = 300.0,
    accept: list[float] | None = None,
) -> list[str]:
    """The text each prompt produces at temperature 0, in order; a `SpecdashError` naming the server on failure.
    `accept`, when given, receives each answer's `spec_accept_length` (SGLang's `meta_info`, speculative modes)."""
    out = []
    async with httpx.AsyncClient(base_url=base_url, timeout=timeout_s) as client:
        if endpoint is not Endpoint.GENERATE and model is None:
            try:
                async with asyncio.timeout(timeout_s):  # the whole answer (httpx's timeout is per read)
                    models = (await client.get("/v1/models")).json()
                model = str(models["data"][0]["id"])
            except (httpx.HTTPError, ValueError, KeyError, IndexError, TypeError, TimeoutError) as exc:
                raise SpecdashError(
                    f"greedy check: cannot read /v1/models from {base_url}: {escape_controls(str(exc))}"
                ) from None
        for prompt in prompts:
            if endpoint is Endpoint.GENERATE:
                path = "/generate"
                body: dict[str, object] = {
                    "text": prompt,
                    "sampling_params": {"max_new_tokens": output_len, "temperature": 0},
                }
            elif endpoint is Endpoint.CHAT:
                path = "/v1/chat/completions"
                body = {
                    "model": model,
                    "messages": [{"role": "user", "content": prompt}],
                    "max_tokens": output_len,
                    "temperature": 0,
                }
            else:
                path = "/v1/completions"
                body = {"model": model, "prompt": prompt, "max_tokens": output_len, "temperature": 0}
            try:
                async with asyncio.timeout(timeout_s):  # the whole answer (httpx's timeout is per read)
                    resp = await client.post(path, json=body)
                resp.raise_for_status()
                data = resp.json()
            except TimeoutError:
                raise SpecdashError(f"greedy check: {base_url}{path} gave no whole answer in {timeout_s:g} s") from None
            except (httpx.HTTPError, ValueError) as exc:
                raise SpecdashError(f"greedy check: {base_url}{path} failed: {escape_controls(str(exc))}") from None
            out.append(_text(data, endpoint))
            if accept is not None and isinstance(data, dict) and isinstance(data.get("meta_info"), dict):
                value = data["meta_info"].get("spec_accept_length")
                if isinstance(value, int | float) and not isinstance(value, bool):
                    accept.append(float(value))
    return out


def _text(data: object, endpoint: Endpoint) -> str:
    try:
        if endpoint is Endpoint.GENERATE:
            return str(data["text"])  # type: ignore[index]
        choice = data["choices"][0]  # type: ignore[index]
        return str(choice["message"]["content"] if endpoint is Endpoint.CHAT else choice["text"])
    except (KeyError, IndexError, TypeError):
        raise SpecdashError(f"greedy check: unexpected response shape: {escape_controls(str(data)[:200])}") from None
