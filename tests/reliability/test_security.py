"""Security: no secret in the local store or its exports, the demo SSH server on loopback only, private run
records on the host. (A changed host key is refused: tests/integration/test_ssh_connect.py and the CLI case
in tests/integration/test_bad_input.py.)"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import subprocess
import sys
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import cast

from aiohttp import web

from specdash.bench.export import export_csv, export_json
from specdash.bench.probe import ProbeSettings
from specdash.bench.prompts import load_prompts
from specdash.bench.store import REDACTED, Store, redact
from specdash.bench.sweep import SweepConfig, run_sweep
from specdash.config import HostConfig
from specdash.remote.embedded import EmbeddedSSHServer
from specdash.remote.ssh import SSHHost, SSHOptions
from specdash.server.lifecycle import Lifecycle
from tests.integration.conftest import target
from tests.reliability.conftest import state_dir
from tests.support.eventually import eventually_sync
from tests.support.fake_server import FakeServer
from tests.support.ports import free_port
from tests.support.remote_sim import sim_config
from tests.support.sshd import Sshd

SECRETS = ("sk-live-0123456789", "hf_abcdefSECRET", "hunter2-password", "admin-key-42")


def _bytes_of(directory: Path, pattern: str) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(directory.glob(pattern)))


def _listeners(port: int) -> list[str]:
    out = subprocess.run(["ss", "-Hltn", f"sport = :{port}"], capture_output=True, text=True, check=True).stdout
    return [line.split()[3] for line in out.splitlines() if line.strip()]


class LeakyServer(FakeServer):
    """Answers `/server_info` the way SGLang does: with the server's arguments, `api_key` included."""

    async def _server_info(self, request: web.Request) -> web.Response:
        return web.json_response(
            {
                "version": "0.5.6",
                "api_key": SECRETS[0],
                "admin_api_key": SECRETS[3],
                "hf_token": SECRETS[1],
                "max_total_tokens": 4096,
                "tokenizer_path": "/models/t",
                "internal_states": [{"avg_spec_accept_length": 2.5, "password": SECRETS[2]}],
                "launch_argv": ["--api-key", SECRETS[0], "--tp", "8"],
            }
        )


async def test_no_secret_reaches_the_store_or_its_exports(tmp_path: Path) -> None:
    """A sweep against a server whose /server_info echoes its api key (as SGLang's does) stores the run
    with every secret-looking value redacted: the database file's bytes, the JSON and CSV exports hold none
    of the secrets; ordinary arguments (`max_total_tokens`, `tokenizer_path`) are kept."""
    server = LeakyServer()
    await server.start()
    db = tmp_path / "s.db"
    try:
        with Store(db) as store:
            cfg = SweepConfig(
                levels=(1,), requests_per_level=2, warmup_requests=0, processes=0, settings=ProbeSettings(output_len=4)
            )
            result = await run_sweep(server.url, cfg, load_prompts("chat"), store)
            assert result.run_id is not None
            run = store.run(result.run_id)
            exports = export_json(store, result.run_id) + export_csv(store, result.run_id, samples=True)
    finally:
        await server.stop()
    assert run is not None and run.meta.server_args is not None
    args = run.meta.server_args
    assert args["api_key"] == REDACTED
    assert args["max_total_tokens"] == 4096
    assert args["tokenizer_path"] == "/models/t"
    assert args["launch_argv"] == ["--api-key", REDACTED, "--tp", "8"]
    raw = _bytes_of(tmp_path, "s.db*")  # the WAL too
    for secret in SECRETS:
        assert secret.encode() not in raw, secret
        assert secret not in exports, secret


def test_redaction_keeps_what_is_not_a_secret() -> None:
    args = {
        "speculative_num_draft_tokens": 16,
        "eos_token_id": 2,
        "skip_tokenizer_init": False,
        "authors": ["x"],
        "client_secret": "s",
        "argv": ["--model", "m", "--password=p", "--token", "t"],
    }
    out = redact(args)
    assert out["speculative_num_draft_tokens"] == 16 and out["eos_token_id"] == 2 and out["authors"] == ["x"]
    assert out["client_secret"] == REDACTED
    assert out["argv"] == ["--model", "m", f"--password={REDACTED}", "--token", REDACTED]


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), 0.2):
            return True
    except OSError:
        return False


def test_a_password_in_the_environment_stays_out_of_the_store(tmp_path: Path) -> None:
    """`specdash bench --url` with a secret in the environment and a secret-looking model name argument:
    the store file holds neither the environment secret nor anything but what the sweep needs."""
    server_port = free_port()
    fake = subprocess.Popen(
        [sys.executable, "-m", "tests.support.fake_server", "--port", str(server_port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    db = tmp_path / "env.db"
    env = {"SPECDASH_CONFIG": str(tmp_path / "none.toml"), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    env.update(HF_TOKEN=SECRETS[1], SGLANG_API_KEY=SECRETS[0], PGPASSWORD=SECRETS[2])
    try:
        eventually_sync(  # the fake server starts
            lambda: _accepts(server_port), timeout=30, what=f"the fake server listens on port {server_port}"
        )
        done = subprocess.run(
            [sys.executable, "-m", "specdash", "bench", "--url", f"http://127.0.0.1:{server_port}", "--levels", "1",
             "--requests-per-level", "2", "--output-len", "4", "--warmup", "0", "--processes", "0", "--db", str(db),
             "--json"],
            capture_output=True, text=True, env=env, timeout=120,
        )  # fmt: skip
    finally:
        fake.terminate()
        fake.wait(10)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout)["levels"]
    raw = _bytes_of(tmp_path, "env.db*")
    assert raw
    for secret in SECRETS[:3]:
        assert secret.encode() not in raw


async def test_the_demo_ssh_server_listens_on_loopback_only() -> None:
    server = EmbeddedSSHServer()
    endpoint = await server.start()
    try:
        assert server._server is not None
        bound = [sock.getsockname()[0] for sock in server._server.sockets]
        local = await asyncio.to_thread(_listeners, endpoint.port)
    finally:
        await server.stop()
    assert bound == ["127.0.0.1"], bound
    assert local == [f"127.0.0.1:{endpoint.port}"], local
    assert endpoint.host == "127.0.0.1" and endpoint.target.endswith(f"@127.0.0.1:{endpoint.port}")


async def test_remote_run_records_are_private(sshd: Sshd, ssh_options: SSHOptions, tmp_path: Path) -> None:
    """The state dir and run directories are 0700 and every file in them 0600 (a launch command may hold an
    api key), also the pointer to the current run; as are the streamed-process pidfiles."""
    extra = f'[modes.quiet]\nengine = "sglang"\nmodel = "/m"\nport = {free_port()}\nlauncher = ["sleep", "30"]\n'
    cfg = sim_config(tmp_path, port=free_port(), extra_modes=extra)
    hc = HostConfig(name="h", address=target(sshd), state_dir=state_dir(tmp_path))
    async with SSHHost(target(sshd), ssh_options) as host:
        life = Lifecycle(host, hc)
        record = await life.start(cfg.mode("quiet"))
        try:
            listing = await host.run(f"cd {hc.state_dir} && find . -printf '%m %y %p\\n'")
            stream = cast(AsyncGenerator[str, None], host.stream("echo up; sleep 5"))  # a tagged pidfile
            async with contextlib.aclosing(stream):
                await anext(stream)  # the wrapper has written its pidfile before the command's first line
                procs = await host.run(f"find .specdash/procs/{host.client_id} -printf '%m %y %p\\n'")
        finally:
            await life.stop(record, grace=2)
    entries = [line.split(maxsplit=2) for line in listing.stdout.splitlines()]
    run_dir = f"./runs/{record.id}"
    expected = {".", "./runs", run_dir, "./current", *(f"{run_dir}/{f}" for f in ("run.json", "pid", "server.log"))}
    assert {p for _, _, p in entries} >= expected
    wrong = [(m, p) for m, kind, p in entries if (kind == "d" and m != "700") or (kind == "f" and m != "600")]
    assert wrong == [], wrong
    proc_entries = [line.split(maxsplit=2) for line in procs.stdout.splitlines()]
    assert proc_entries
    wrong = [(m, p) for m, kind, p in proc_entries if (kind == "d" and m != "700") or (kind == "f" and m != "600")]
    assert wrong == [], wrong
