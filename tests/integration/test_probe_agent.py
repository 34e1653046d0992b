"""The probe on the host (specdash.bench.agent) through the real loopback sshd: shipped once by content hash,
run with the host's Python, records streamed back and kept on the host, nothing left running; no/old Python
falls back to the local probe with the reason recorded; a crash fails the level with the agent's traceback;
a version mismatch is refused.

The "host" is this machine as the test user, so the agent reaches the fake server on 127.0.0.1 as a probe on a
GPU box reaches its server on that box's loopback.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import socket
import stat
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from specdash.bench.agent.bundle import MODULES, build
from specdash.bench.agent.wire import PROTOCOL, sample_from_list, sample_to_list
from specdash.bench.probe import ProbeSettings
from specdash.bench.prompts import load_prompts
from specdash.bench.store import Store
from specdash.bench.sweep import Sweep, SweepConfig
from specdash.remote.ssh import SSHHost, SSHOptions
from specdash.server.probe_agent import HostRunner, check_hello, parse_python_version
from tests.integration.conftest import target, trust
from tests.support import pythons
from tests.support.fake_server import FakeServer
from tests.support.ports import free_port
from tests.support.remote_sim import sim_config, with_host
from tests.support.sshd import TEST_HOME, Keys, Sshd, make_dir


def config(levels: tuple[int, ...] = (1, 3), **kw: object) -> SweepConfig:
    base: dict[str, object] = dict(mode="m", levels=levels, requests_per_level=6, metrics_poll_s=0.05,
                                   progress_interval_s=0.05, settings=ProbeSettings(output_len=8))  # fmt: skip
    base.update(kw)
    return SweepConfig(**base)  # type: ignore[arg-type]


def agents_running(runners: list[HostRunner]) -> list[int]:
    """PIDs on this machine running for these runners (agent or follower): their run directory is on the command
    line. Not by the zipapp's name: other tests' agents share this "host" and its bundle."""
    dirs = [f"{r.run_dir}/".encode() for r in runners]
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if any(d in cmdline for d in dirs):
                pids.append(int(entry.name))
    return pids


async def test_a_sweep_with_the_probe_on_the_host(host: SSHHost, server: FakeServer) -> None:
    store = Store(":memory:")
    runners: list[HostRunner] = []

    def make(settings: ProbeSettings, prompts: tuple[str, ...]) -> HostRunner:
        runners.append(HostRunner(host, server.url, settings, prompts))
        return runners[-1]

    bundle = build()
    (TEST_HOME / ".specdash" / "agent" / bundle.name).unlink(missing_ok=True)
    sweep = Sweep(server.url, config(), load_prompts("chat"), store, host_runner=make, link_in_process=True)
    result = await sweep.run()
    # The agent's own word on where it ran: this machine (the test sshd's), and no Slurm step.
    assert result.probe == {"where": "host", "python": runners[0].python_version, "agent_host": socket.gethostname()}
    assert parse_python_version(runners[0].python_version) is not None
    assert [lv.status for lv in result.levels] == ["done", "done"]
    assert result.run_id is not None
    run = store.run(result.run_id)
    assert run is not None and run.meta.config is not None and run.meta.config["probe"]["where"] == "host"
    for lv in result.levels:
        assert lv.level_id is not None
        samples = store.samples(result.run_id, lv.level_id)
        assert len(samples) == 6 and all(s.ok and s.output_tokens == 8 for s in samples)
        assert len(lv.headroom) == 1 and lv.headroom[0].events > 0  # the agent's own headroom, from the host
    # Every record was kept on the host too: one file per agent run (warmup and level), one line per request.
    # (This sweep's run directories only: other tests share the test user's home.)
    files = [f for r in runners for f in (TEST_HOME / r.run_dir).glob("*.jsonl")]
    assert len(files) == 4
    lines = [json.loads(x) for f in files for x in f.read_text().splitlines()]
    assert sum(1 for x in lines if x["t"] == "s") == 1 + 6 + 3 + 6  # warmups of C requests, then 6 each
    assert sum(1 for x in lines if x["t"] == "done") == 4
    # Shipped once by content hash: a second sweep finds it cached (same file, untouched).
    path = TEST_HOME / ".specdash" / "agent" / bundle.name
    before = path.stat().st_mtime_ns
    assert path.read_bytes() == bundle.data
    again = await Sweep(server.url, config((1,)), load_prompts("chat"), host_runner=make).run()
    assert again.probe is not None and again.probe["where"] == "host"
    assert path.stat().st_mtime_ns == before
    assert runners and agents_running(runners) == []  # each agent ended by itself


async def test_the_agent_reads_the_servers_gauges_on_the_host_so_no_poll_crosses_the_link(
    host: SSHHost, server: FakeServer
) -> None:
    """With the probe on the host, the gauges polled during a level (running/queued requests) are read by the
    agent next to the server and come back as records; specdash itself reads `/metrics` only at the level's
    two edges (the counters the server's own count comes from)."""
    server.config.interval_s = 0.02  # 8 tokens: a level of about 0.5 s, so several 0.05 s polls fall inside it

    def make(settings: ProbeSettings, prompts: tuple[str, ...]) -> HostRunner:
        return HostRunner(host, server.url, settings, prompts)

    result = await Sweep(server.url, config((2,)), load_prompts("chat"), host_runner=make).run()
    assert result.probe is not None and result.probe["where"] == "host", result.probe
    [level] = result.levels
    assert level.status == "done", level.abort_reason
    assert level.server.max_running is not None  # the polls' gauges reached the level's view
    agent = [ua for ua in server.metrics_readers if ua == "specdash-agent"]
    ours = [ua for ua in server.metrics_readers if ua != "specdash-agent"]
    assert len(agent) >= 2, server.metrics_readers
    assert len(ours) == 2, server.metrics_readers  # before and after the level, nothing between


async def test_an_unchanged_agent_is_never_sent_again_and_a_tampered_one_is_replaced(
    host: SSHHost, server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The host keeps the zipapp by content hash: a sweep whose client is unchanged sends none of it (not even
    to a `cat` that throws it away), and a file of that name whose content no longer matches its hash (edited,
    truncated) is replaced before anything runs it."""
    sent: list[int] = []
    real_run = host.run

    async def spying_run(command: str, *, timeout: float = 30.0, stdin: str | None = None) -> object:
        sent.append(len(stdin or ""))
        return await real_run(command, timeout=timeout, stdin=stdin)

    monkeypatch.setattr(host, "run", spying_run)
    bundle = build()
    path = TEST_HOME / ".specdash" / "agent" / bundle.name

    def make(settings: ProbeSettings, prompts: tuple[str, ...]) -> HostRunner:
        return HostRunner(host, server.url, settings, prompts)

    async def sweep() -> None:
        result = await Sweep(server.url, config((1,)), load_prompts("chat"), host_runner=make).run()
        assert result.probe is not None and result.probe["where"] == "host", result.probe
        assert [lv.status for lv in result.levels] == ["done"]

    await sweep()  # whatever the host had, it has the bundle now
    assert path.read_bytes() == bundle.data
    sent.clear()
    await sweep()
    assert max(sent) < len(bundle.data), f"a cached agent was sent again: stdin sizes {sent}"
    path.write_bytes(bundle.data[:-10] + b"tampered!!")  # same name, other content
    sent.clear()
    await sweep()
    assert path.read_bytes() == bundle.data
    assert max(sent) >= len(bundle.data), sent


async def test_no_python_on_the_host_falls_back_to_the_local_probe(host: SSHHost, server: FakeServer) -> None:
    def make(settings: ProbeSettings, prompts: tuple[str, ...]) -> HostRunner:
        return HostRunner(host, server.url, settings, prompts, python="python-nowhere-to-be-found")

    store = Store(":memory:")
    result = await Sweep(server.url, config((1,)), load_prompts("chat"), store, host_runner=make).run()
    assert result.probe is not None and result.probe["where"] == "local"
    assert "no python-nowhere-to-be-found on the host" in result.probe["why"]
    assert [lv.status for lv in result.levels] == ["done"]  # measured locally instead
    assert result.run_id is not None
    run = store.run(result.run_id)
    assert run is not None and run.meta.config is not None and run.meta.config["probe"] == result.probe


async def test_an_old_python_on_the_host_falls_back_with_one_line(host: SSHHost, server: FakeServer) -> None:
    directory = make_dir("specdash-oldpy-")
    old = directory / "python3.8"
    old.write_text("#!/bin/sh\necho 3.8.10\n")
    old.chmod(old.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)

    def make(settings: ProbeSettings, prompts: tuple[str, ...]) -> HostRunner:
        return HostRunner(host, server.url, settings, prompts, python=str(old))

    result = await Sweep(server.url, config((1,)), load_prompts("chat"), host_runner=make).run()
    assert result.probe is not None and result.probe["where"] == "local"
    assert "is 3.8.10, the probe agent needs >= 3.9" in result.probe["why"]
    assert "\n" not in result.probe["why"]


@pytest.mark.parametrize(
    ("script", "said"),
    [
        ("echo 3.8.10", "the host's python3 is 3.8.10, the probe agent needs >= 3.9: the probe runs here"),
        ("echo 'python3: cannot execute: required file not found' >&2; exit 127", "no python3 on the host"),
    ],
    ids=["too-old", "unusable"],
)
async def test_a_host_whose_python3_cannot_run_the_agent_falls_back_with_one_warning_in_the_run(
    make_sshd: Callable[..., Sshd], ssh_options: SSHOptions, known_hosts: Path, server: FakeServer,
    script: str, said: str,
) -> None:  # fmt: skip
    """`python3` on the host's PATH (the sshd's sessions get a PATH with a fake one first) is too old or
    broken: the sweep measures with the local probe, and the run's record says why, in one line, once."""
    directory = make_dir("specdash-fakepy-")
    fake = directory / "python3"
    fake.write_text(f"#!/bin/sh\n{script}\n")
    fake.chmod(0o755)
    sshd = make_sshd("oldpy", set_env={"PATH": f"{directory}:/usr/local/bin:/usr/bin:/bin"})
    trust(known_hosts, sshd)
    store = Store(":memory:")
    async with SSHHost(target(sshd), ssh_options) as host:
        assert (await host.run("command -v python3")).stdout.strip() == str(fake)  # the fake one is found

        def make(settings: ProbeSettings, prompts: tuple[str, ...]) -> HostRunner:
            return HostRunner(host, server.url, settings, prompts)

        warned: list[str] = []
        result = await Sweep(server.url, config((1,)), load_prompts("chat"), store, host_runner=make,
                             on_warning=warned.append).run()  # fmt: skip
    assert result.probe is not None and result.probe["where"] == "local"
    assert said in result.probe["why"] and "\n" not in result.probe["why"]
    assert [lv.status for lv in result.levels] == ["done"]  # measured here instead
    assert result.run_id is not None
    run = store.run(result.run_id)
    assert run is not None and run.meta.config is not None and run.meta.config["probe"] == result.probe
    assert run.meta.provenance is not None
    mentions = [w for w in run.meta.provenance["guards"] if "probe on the host unavailable" in w]
    assert mentions == [f"probe on the host unavailable: {result.probe['why']}"]  # one warning, stored
    assert [w for w in warned if "probe on the host" in w] == mentions


def _old_python(major: int, minor: int) -> Iterator[tuple[Path, str]]:
    """(a `python3` the test user can run, its version) for the machine image's pyenv `major.minor`."""
    home = pythons.find(major, minor)
    if home is None:
        pytest.skip(pythons.skip_reason(major, minor))
    wrapper = pythons.for_test_user(home)
    yield wrapper, home.name
    shutil.rmtree(wrapper.parents[2], ignore_errors=True)


@pytest.fixture(scope="module")
def python39() -> Iterator[tuple[Path, str]]:
    yield from _old_python(3, 9)


@pytest.fixture(scope="module")
def python38() -> Iterator[tuple[Path, str]]:
    yield from _old_python(3, 8)


async def test_the_agent_runs_a_sweep_on_the_hosts_python_3_9(
    host: SSHHost, server: FakeServer, python39: tuple[Path, str]
) -> None:
    """The oldest Python the agent supports, for real: the zipapp runs a warmup and two levels under 3.9.18
    (stdlib asyncio, no uvloop: its copy has no site-packages), and the records come back whole."""
    python, version = python39
    runners: list[HostRunner] = []

    def make(settings: ProbeSettings, prompts: tuple[str, ...]) -> HostRunner:
        runners.append(HostRunner(host, server.url, settings, prompts, python=str(python)))
        return runners[-1]

    store = Store(":memory:")
    result = await Sweep(server.url, config(), load_prompts("chat"), store, host_runner=make).run()
    assert result.probe == {"where": "host", "python": version, "agent_host": socket.gethostname()}
    assert [lv.status for lv in result.levels] == ["done", "done"], [lv.abort_reason for lv in result.levels]
    assert result.run_id is not None
    for lv in result.levels:
        assert lv.level_id is not None
        samples = store.samples(result.run_id, lv.level_id)
        assert len(samples) == 6 and all(s.ok and s.output_tokens == 8 for s in samples)
        assert all(len(s.chunk_tokens) == len(s.chunk_offsets_us) == 8 for s in samples)
        assert len(lv.headroom) == 1 and lv.headroom[0].events == 6 * 8
    # The follower said which Python it ran on (the agent's own interpreter: the same command).
    hello = await host.run(
        f"cd && {python} {runners[0].agent_path} --follow {runners[0].records_path} --pid 1 "
        f"--alive {runners[0].run_dir}/hello.alive --expect {PROTOCOL} </dev/null"
    )
    assert json.loads(hello.stdout.splitlines()[0])["py"] == version
    assert runners and agents_running(runners) == []


async def test_python_3_8_on_the_host_falls_back_with_one_line(
    host: SSHHost, server: FakeServer, python38: tuple[Path, str]
) -> None:
    python, version = python38

    def make(settings: ProbeSettings, prompts: tuple[str, ...]) -> HostRunner:
        return HostRunner(host, server.url, settings, prompts, python=str(python))

    result = await Sweep(server.url, config((1,)), load_prompts("chat"), host_runner=make).run()
    assert result.probe is not None and result.probe["where"] == "local"
    assert f"is {version}, the probe agent needs >= 3.9" in result.probe["why"]
    assert "\n" not in result.probe["why"]
    assert [lv.status for lv in result.levels] == ["done"]  # measured here instead


def test_bench_json_says_the_probe_ran_on_the_hosts_python_3_9(
    tmp_path: Path, make_sshd: Callable[..., Sshd], ssh_keys: Keys, known_hosts: Path, python39: tuple[Path, str]
) -> None:
    """`specdash bench HOST --json` against a host whose `python3` is 3.9 (first on its sessions' PATH)."""
    python, version = python39
    sshd = make_sshd("py39", set_env={"PATH": f"{python.parent}:/usr/local/bin:/usr/bin:/bin"})
    trust(known_hosts, sshd)
    cfg = sim_config(tmp_path, port=free_port())
    state_dir = f"~/.specdash-tests/{uuid.uuid4().hex}"
    env = with_host(cfg, "old", target(sshd), ssh_keys.client_key, known_hosts, state_dir)

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "specdash", *args], capture_output=True, text=True, env=env,
                              timeout=300)  # fmt: skip

    try:
        out = cli("bench", "old", "--mode", "baseline", "--levels", "2", "--output-len", "16",
                  "--requests-per-level", "6", "--json")  # fmt: skip
    finally:
        cli("down", "old", "--grace", "5")
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout)["baseline"]
    assert result["probe"] == {"where": "host", "python": version, "agent_host": socket.gethostname()}
    assert [lv["status"] for lv in result["levels"]] == ["done"]


async def test_an_agent_crash_fails_the_level_with_its_traceback(host: SSHHost, server: FakeServer) -> None:
    runner = HostRunner(host, server.url, ProbeSettings(output_len=8), ("one",))
    await runner.prepare()
    # Break the job the agent reads (a field this version does not know): the real agent crashes on it.
    job = TEST_HOME / runner._job  # noqa: SLF001 - the test reaches into the host's file on purpose
    data = json.loads(job.read_text())
    data["settings"]["no_such_setting"] = 1
    job.write_text(json.dumps(data))

    store = Store(":memory:")
    result = await Sweep(server.url, config((2,), warmup_requests=0), load_prompts("chat"), store,
                         host_runner=lambda s, p: runner).run()  # fmt: skip
    level = result.levels[0]
    assert level.status == "failed"
    assert level.abort_reason is not None
    assert "Traceback" in level.abort_reason and "no_such_setting" in level.abort_reason
    assert level.level_id is not None
    stored = [lv for run in store.runs() for lv in store.levels(run.id)]
    assert stored[0].abort_reason == level.abort_reason  # the tail is in the store


async def test_a_version_mismatch_is_refused_by_the_agent_and_by_the_client(host: SSHHost) -> None:
    runner = HostRunner(host, "http://127.0.0.1:1", ProbeSettings(), ("one",))
    await runner.prepare()
    done = await host.run(
        f"cd && python3 {runner.agent_path} --job x --plan '{{}}' --records /dev/null --expect 0.0.0+0"
    )
    assert done.exit_status == 2
    first = json.loads(done.stdout.splitlines()[0])
    assert first["t"] == "refused" and PROTOCOL in first["why"] and "0.0.0+0" in first["why"]
    assert check_hello(first) == first["why"]
    assert check_hello({"t": "hello", "v": "9.9.9+9", "pid": 1, "now": 0}) is not None
    assert check_hello({"t": "hello", "v": PROTOCOL, "pid": 1, "now": 0}) is None


@pytest.mark.parametrize("offset", [0, -5_000_000_000])
async def test_records_round_trip_onto_the_clients_clock(server: FakeServer, offset: int) -> None:
    from specdash.bench.probe import Probe

    async with Probe(server.url, ProbeSettings(output_len=4), ("x",)) as probe:
        s = await probe.request(0, 123)
    back = sample_from_list(json.loads(json.dumps(sample_to_list(s))), offset)
    assert back.start_ns == s.start_ns + offset and back.end_ns == s.end_ns + offset
    assert back.chunk_tokens == s.chunk_tokens and back.error is s.error and back.output_tokens == 4


def test_the_agent_ships_only_stdlib_modules() -> None:
    import ast
    import sys

    root = Path(__file__).resolve().parents[2]
    for rel in MODULES:
        tree = ast.parse((root / rel).read_text())
        for node in tree.body:  # module level: optional imports inside functions (uvloop) may fail there
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            for name in names:
                top = name.split(".")[0]
                assert (
                    top in sys.stdlib_module_names
                    or name in {m[:-3].replace("/", ".") for m in MODULES}
                    or (top == "specdash" and f"{name.replace('.', '/')}/__init__.py" in MODULES)
                ), f"{rel} imports {name}"


async def test_a_cancelled_sweep_stops_its_agent_on_the_host(host: SSHHost, server: FakeServer) -> None:
    """The agent runs detached from the SSH channel, so closing the follower does not stop it: the sweep's
    clean-up does (SIGTERM); in-flight requests finish and the agent records `done` with the reason."""
    server.config.interval_s = 0.01
    runners: list[HostRunner] = []

    def make(settings: ProbeSettings, prompts: tuple[str, ...]) -> HostRunner:
        runners.append(HostRunner(host, server.url, settings, prompts))
        return runners[-1]

    sweep = Sweep(server.url, config((2,), requests_per_level=100_000, warmup_requests=0), load_prompts("chat"),
                  host_runner=make)  # fmt: skip
    task = asyncio.create_task(sweep.run())
    deadline = time.monotonic() + 30
    while not runners or not runners[0].records_path or not (TEST_HOME / runners[0].records_path).exists():
        assert time.monotonic() < deadline and not task.done(), "the agent did not start"
        await asyncio.sleep(0.05)
    records = TEST_HOME / runners[0].records_path
    while '"t":"s"' not in records.read_text():  # a request finished: the level is under way
        assert time.monotonic() < deadline, "no record from the agent"
        await asyncio.sleep(0.05)
    assert agents_running(runners), "the listing finds the running agent (else its emptiness below proves nothing)"
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    deadline = time.monotonic() + 20
    while agents_running(runners):
        assert time.monotonic() < deadline, f"agents outlived the cancelled sweep: {agents_running(runners)}"
        await asyncio.sleep(0.05)
    done = [json.loads(x) for x in records.read_text().splitlines() if x.startswith('{"t":"done"')]
    assert len(done) == 1 and done[0]["o"]["aborted"] == "agent terminated", done
