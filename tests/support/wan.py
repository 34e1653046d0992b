"""The WAN rig: a GPU host 40 ms ± 4 ms away each way, behind a rate-limited link.

    client (root ns) -> tests.support.relay on 127.0.0.1:P (delays each chunk, both ways, order kept)
                     -> veth with a `tbf` qdisc each way (RATE) -> sshd inside namespace sd-<id>
                                                                   simulator on the namespace's 127.0.0.1

The delay lives in the relay (this kernel has no netem qdisc); the rate in `tbf` on both veth ends. The
simulator runs inside the namespace, so only SSH (a port forward, or a probe agent's records) crosses the
link, as with a real host. Used by tests/reliability/test_wan.py and benchmarks/wan.py. Needs root.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specdash.bench.samples import RequestSample
from specdash.remote.ssh import SSHOptions
from tests.support.netns import Netns
from tests.support.sshd import TEST_USER, Keys, Sshd

DELAY_S = 0.040
"""One-way delay (80 ms round trip: a laptop to a GPU box a continent away)."""
JITTER_S = 0.004
"""± uniform jitter per chunk."""
RATE = "50mbit"
"""The link's rate each way (`tbf`)."""
REPO = Path(__file__).resolve().parents[2]


def tc(*args: str, netns: str | None = None) -> None:
    """Run `tc ARGS` (inside `netns` when given); raise with tc's own words on failure."""
    argv = ["tc", *(["-n", netns] if netns else []), *args]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=10)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: {done.stderr.strip() or done.returncode}")


def shape(ns: Netns, rate: str = RATE) -> None:
    """Rate-limit both directions of `ns`'s veth with a token bucket (burst ~ 10 ms at 50 Mbit/s)."""
    for dev, where in ((ns.root_if, ns.outer), (ns.ns_if, ns.name)):
        tc(
            "qdisc",
            "replace",
            "dev",
            dev,
            "root",
            "tbf",
            "rate",
            rate,
            "burst",
            "64kb",
            "latency",
            "100ms",
            netns=where,
        )


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    return env


@dataclass
class RelayProcess:
    """`python -m tests.support.relay` in a process of its own (see tests/support/relay.py)."""

    target: str
    delay_s: float = DELAY_S
    jitter_s: float = JITTER_S
    port: int = 0
    proc: subprocess.Popen[str] | None = None

    def start(self, timeout: float = 20.0) -> RelayProcess:
        argv = [sys.executable, "-m", "tests.support.relay", "--target", self.target]
        argv += ["--delay", str(self.delay_s), "--jitter", str(self.jitter_s)]
        self.proc = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=_child_env(), start_new_session=True
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()  # the relay prints its port as soon as it listens
        if not line.startswith("port "):
            self.stop()
            raise RuntimeError(f"relay did not start (said {line!r})")
        self.port = int(line.split()[1])
        return self

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)
        self.proc = None


@dataclass
class WanHost:
    """A namespace host with sshd, reached through the relay; a simulator inside on demand."""

    ns: Netns
    sshd: Sshd
    relay: RelayProcess
    options: SSHOptions
    directory: Path
    sims: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def address(self) -> str:
        """`user@127.0.0.1:port`: the relay's end, the far side of the WAN."""
        return f"{TEST_USER}@127.0.0.1:{self.relay.port}"

    @property
    def direct_address(self) -> str:
        """sshd in the namespace without the relay (the link's rate limit only)."""
        return f"{TEST_USER}@{self.ns.addr}:22"

    def start_sim(self, *args: str, request_log: Path | None = None, timeout: float = 60.0) -> int:
        """Start `specdash sim ARGS` inside the namespace on a free port of its loopback; return the port
        once `/health` answers there. `request_log`: the simulator's per-request ground truth."""
        port = 30000 + len(self.sims) + (os.getpid() % 5000)
        argv = ["ip", "netns", "exec", self.ns.name, sys.executable, "-m", "specdash", "sim", "--port", str(port)]
        argv += ["--model-path", "/models/kimi", "--sim-time-scale", "0.005", "--enable-metrics", *args]
        if request_log is not None:
            argv += ["--sim-request-log", str(request_log)]
        log = open(self.directory / f"sim-{port}.log", "wb")  # noqa: SIM115 - the process owns it
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=_child_env(), start_new_session=True)
        log.close()
        self.sims.append(proc)
        deadline = time.monotonic() + timeout
        url = f"http://127.0.0.1:{port}/health"
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"simulator exited with {proc.returncode}: {self.sim_log(port)[-500:]}")
            got = self.ns.exec(sys.executable, "-c", _HEALTH.format(url=url), timeout=10)
            if got.stdout.strip() == "200":
                return port
            time.sleep(0.2)
        raise RuntimeError(f"simulator on port {port} not healthy after {timeout:g} s")

    def sim_log(self, port: int) -> str:
        return (self.directory / f"sim-{port}.log").read_text(errors="replace")

    def close(self) -> None:
        for proc in self.sims:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(5)
        self.relay.stop()
        self.ns.close()


_HEALTH = (
    "import urllib.request as u\n"
    "try:\n print(u.urlopen('{url}', timeout=2).status)\n"
    "except Exception as e:\n print(type(e).__name__)"
)


@contextlib.contextmanager
def wan_host(
    ns: Netns, keys: Keys, options: SSHOptions, directory: Path, delay_s: float = DELAY_S, jitter_s: float = JITTER_S
) -> Iterator[WanHost]:
    """Build the rig on `ns` (`tbf`, sshd, relay); stop the relay and simulators after (by PID).

    The namespace stays the caller's (its `close()` stops sshd and removes the link).
    """
    relay = RelayProcess(f"{ns.addr}:22", delay_s, jitter_s)
    host: WanHost | None = None
    try:
        shape(ns)
        server = ns.start_sshd(keys)
        relay.start()
        known = directory / "wan_known_hosts"
        known.write_text(f"[127.0.0.1]:{relay.port} " + " ".join(keys.host_pub.split()[:2]) + "\n")
        opts = SSHOptions(
            **{
                **options.__dict__,
                "known_hosts": known,
                "keepalive_interval": 1.0,
                "keepalive_count_max": 3,
                "connect_timeout": 5.0,
            }
        )
        host = WanHost(ns, server, relay, opts, directory)
        yield host
    finally:
        if host is not None:
            host.close()
        else:
            relay.stop()


def read_truth(path: Path) -> list[dict[str, Any]]:
    """The simulator's request log (`--sim-request-log`), one dict per finished request."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def truth_samples(
    records: list[dict[str, Any]], samples: list[RequestSample], slack_s: float = 0.0, socket: bool = False
) -> list[RequestSample]:
    """The simulator's own view of the requests of one level, as `RequestSample`s (so `summarize` gives the
    ground-truth TTFT/TPOT/ITL/tok/s by the very same definitions).

    A level's requests are the records created between its first send and its last end (the warmup wave is
    over before the first send; the next level's starts after the last end): the clocks agree, since both
    sides read CLOCK_MONOTONIC on one kernel. "Start" is the server's receipt, "chunks" its decode steps.
    Samples from a probe agent sit on a clock estimated from its first record (late by up to the one-way
    delay): `slack_s` widens the window by that much, and only records of the level's length are kept (the
    warmups' requests are shorter). `socket` takes the server's socket-side stamps for the start and the first
    token (`received`, `first_sent`: its front end's queue and serialisation included, as a client sees them).
    """
    if not samples:
        return []
    lo = min(s.start_ns for s in samples) / 1e9 - slack_s
    hi = max(s.end_ns for s in samples) / 1e9 + slack_s
    length = max(s.requested_tokens for s in samples) if slack_s else None
    chosen = [
        r
        for r in records
        if lo <= r["created"] <= hi and r["first"] is not None and (length is None or r["tokens"] == length)
    ]
    out = []
    for k, rec in enumerate(chosen):
        start = int(rec["received" if socket else "created"] * 1e9)
        first = rec["first_sent" if socket else "first"]
        emitted = rec["emitted"]
        tokens = [n - (emitted[i - 1][1] if i else 0) for i, (_, n) in enumerate(emitted)]
        out.append(
            RequestSample(
                index=k,
                prompt_index=0,
                worker=0,
                error=None,
                detail="",
                http_status=200,
                scheduled_ns=start,
                start_ns=start,
                end_ns=int(rec["finished"] * 1e9),
                first_token_ns=int(first * 1e9),
                last_token_ns=int(emitted[-1][0] * 1e9),
                output_tokens=int(rec["tokens"]),
                requested_tokens=int(rec["tokens"]),
                estimated=False,
                per_chunk_exact=True,
                chunk_offsets_us=tuple(int(t * 1e6) - start // 1000 for t, _ in emitted),
                chunk_tokens=tuple(tokens),
            )
        )
    return out


def client_options(keys: Keys, directory: Path) -> SSHOptions:
    """Client options for the rig outside pytest (benchmarks): our key, no agent, an empty ssh config."""
    empty = directory / "ssh_config"
    empty.write_text("")
    return SSHOptions(
        identity_files=(keys.client_key,),
        known_hosts=directory / "known_hosts",
        ssh_config=empty,
        use_agent=False,
        connect_timeout=5,
    )
