"""A real Slurm cluster on this one machine for tests: munged, slurmctld and two slurmd (nodes n1, n2).

Debian 12's packages (`slurmctld`, `slurmd`, `slurm-client`, `munge`; Slurm 22.05), started as processes this
object owns, with a slurm.conf in a directory of its own: its own ports, spool and state directories, munge
socket and key, so nothing of the machine's own Slurm (if any) is read or touched. Both node names resolve to
127.0.0.1 (`NodeAddr`), each slurmd with its own port. No cgroups (`proctrack/pgid`, `task/none`): enough to run
batch jobs and `srun` steps, to kill a node's slurmd, to reach time limits.

Commands (sbatch, squeue, scontrol) find it through `SLURM_CONF`: `cluster.env`. Everything is stopped by PID
(`stop`): the jobs first (`scancel` of this cluster's own jobs), then the daemons it started.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.ports import free_port
from tests.support.sshd import make_dir

DAEMONS = ("/usr/sbin/munged", "/usr/sbin/slurmctld", "/usr/sbin/slurmd")
NODES = ("n1", "n2")


def skip_reason() -> str | None:
    """Why the daemons cannot run here (None when they can)."""
    if os.geteuid() != 0:
        return "a Slurm cluster for tests needs root (slurmd runs jobs as another user)"
    missing = [d for d in (*DAEMONS, "/usr/bin/sbatch") if not Path(d).exists()]
    if missing:
        return f"missing {', '.join(missing)} (make test installs slurmctld slurmd slurm-client munge)"
    return None


@dataclass
class SlurmCluster:
    """See the module docstring. `start()`, then `env` for commands; `stop()` at the end."""

    dir: Path = field(default_factory=lambda: make_dir("specdash-slurm-"))
    partition: str = "gpu"
    account_partition: str = "lab"
    """A partition that takes only jobs of `account` (`AllowAccounts=`)."""
    account: str = "lab"
    max_time_min: int = 60
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    @property
    def conf(self) -> Path:
        return self.dir / "slurm.conf"

    @property
    def env(self) -> dict[str, str]:
        """What Slurm commands need to find this cluster."""
        return {"SLURM_CONF": str(self.conf)}

    def _write(self) -> None:
        self.dir.chmod(0o755)  # the job's user reads slurm.conf and reaches the munge socket
        for sub in ("state", "log", "spool"):
            (self.dir / sub).mkdir(exist_ok=True)
        key = self.dir / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o600)
        ctl, d1, d2 = free_port(), free_port(), free_port()
        d = self.dir
        nodes = [
            f"NodeName={name} NodeHostname=localhost NodeAddr=127.0.0.1 Port={port} CPUs=2 RealMemory=1000"
            for name, port in zip(NODES, (d1, d2), strict=True)
        ]
        self.conf.write_text(
            "\n".join(
                [
                    "ClusterName=sdtest",
                    "SlurmctldHost=localhost(127.0.0.1)",
                    f"SlurmctldPort={ctl}",
                    f"SlurmdPort={d1}",
                    "AuthType=auth/munge",
                    f"AuthInfo=socket={d}/munge.sock",
                    "CredType=cred/munge",
                    "SlurmUser=root",
                    "SlurmdUser=root",
                    f"StateSaveLocation={d}/state",
                    f"SlurmdSpoolDir={d}/spool/%n",
                    f"SlurmctldPidFile={d}/slurmctld.pid",
                    f"SlurmdPidFile={d}/slurmd.%n.pid",
                    f"SlurmctldLogFile={d}/log/slurmctld.log",
                    f"SlurmdLogFile={d}/log/slurmd.%n.log",
                    "ProctrackType=proctrack/pgid",
                    "TaskPlugin=task/none",
                    "JobAcctGatherType=jobacct_gather/none",
                    "AccountingStorageType=accounting_storage/none",
                    "SchedulerType=sched/backfill",
                    "SelectType=select/cons_tres",
                    "SelectTypeParameters=CR_Core",
                    "ReturnToService=2",
                    "SlurmdTimeout=5",
                    "SlurmctldTimeout=5",
                    "MessageTimeout=5",
                    "KillWait=5",
                    "InactiveLimit=0",
                    "MinJobAge=600",
                    "MpiDefault=none",
                    *nodes,
                    f"PartitionName={self.partition} Nodes={','.join(NODES)} Default=YES "
                    f"MaxTime={self.max_time_min} State=UP",
                    # Accounts are checked against a partition's AllowAccounts at submit, with or without slurmdbd.
                    f"PartitionName={self.account_partition} Nodes={','.join(NODES)} Default=NO "
                    f"AllowAccounts={self.account} MaxTime={self.max_time_min} State=UP",
                    "",
                ]
            )
        )
        self.conf.chmod(0o644)

    def _spawn(self, name: str, argv: list[str]) -> None:
        log = (self.dir / "log" / f"{name}.out").open("ab")
        env = {**os.environ, **self.env}
        self.procs[name] = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env)

    def start(self, timeout: float = 60.0) -> SlurmCluster:
        """Start munged, slurmctld and both slurmd; return once both nodes are idle."""
        self._write()
        d = self.dir
        self._spawn(
            "munged",
            [
                "/usr/sbin/munged",
                "-F",
                "--force",
                f"--socket={d}/munge.sock",
                f"--key-file={d}/munge.key",
                f"--pid-file={d}/munged.pid",
                f"--seed-file={d}/munged.seed",
                f"--log-file={d}/log/munged.log",
            ],
        )
        self._wait(lambda: (d / "munge.sock").exists(), timeout, "the munge socket")
        self._spawn("slurmctld", ["/usr/sbin/slurmctld", "-D", "-i", "-f", str(self.conf)])
        self._wait(lambda: self.sinfo_ok(), timeout, "slurmctld answering")
        for node in NODES:
            self.start_node(node)
        self.wait_idle(timeout)
        return self

    def start_node(self, node: str) -> None:
        """Start (or restart) one node's slurmd."""
        old = self.procs.get(node)
        if old is not None and old.poll() is None:
            return
        self._spawn(node, ["/usr/sbin/slurmd", "-D", "-N", node, "-f", str(self.conf)])

    def kill_node(self, node: str) -> None:
        """SIGKILL one node's slurmd (its jobs' steps keep running until slurmctld declares the node down)."""
        proc = self.procs[node]
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            proc.wait(10)

    def run(self, *argv: str, timeout: float = 30.0) -> subprocess.CompletedProcess[str]:
        """A Slurm command against this cluster (as root)."""
        return subprocess.run(
            list(argv), capture_output=True, text=True, timeout=timeout, env={**os.environ, **self.env}
        )

    def sinfo_ok(self) -> bool:
        return self.run("sinfo", "-h").returncode == 0

    def node_states(self) -> dict[str, str]:
        out = self.run("sinfo", "-h", "-N", "-o", "%N %T").stdout
        return dict(line.split()[:2] for line in out.splitlines() if len(line.split()) >= 2)

    def wait_idle(self, timeout: float = 60.0) -> None:
        """Until every node is idle (resuming a node a test left down)."""
        for node, state in self.node_states().items():
            if state.startswith("down") or state.startswith("drain"):
                self.run("scontrol", "update", f"NodeName={node}", "State=RESUME")
        self._wait(lambda: set(self.node_states().values()) == {"idle"}, timeout, f"nodes idle ({self.node_states()})")

    def job_state(self, job_id: str) -> str:
        out = self.run("scontrol", "-o", "show", "job", job_id).stdout
        return next((w[9:] for w in out.split() if w.startswith("JobState=")), "")

    def cancel_all(self, timeout: float = 60.0) -> None:
        """Cancel every job of this cluster (all are the tests') and wait for the queue to empty."""
        for partition in (self.partition, self.account_partition):
            self.run("scancel", "--partition", partition)
        self._wait(lambda: not self.run("squeue", "-h").stdout.strip(), timeout, "an empty queue")

    def reap_strays(self) -> list[int]:
        """SIGKILL what this cluster's jobs left behind: a node whose slurmd was killed keeps its slurmstepd and
        the step's processes after slurmctld declared it down (no slurmd is there to end them). They are found by
        this cluster's own `SLURM_CONF` path in their environment (a path no other process has), never by name,
        and so are their process groups: a simulator's TP child has overwritten its environment with its title
        (`sglang::scheduler_TP1`), so only its group (its simulator's) finds it. Without the groups, the child of
        the node-fail test's rank outlived every suite run (ci51, ci54, ci55, ci56)."""
        mine = f"SLURM_CONF={self.conf}".encode()
        daemons = {p.pid for p in self.procs.values()}
        ours = {os.getpgrp()}  # the daemons run in this process's group: never signal it
        killed: list[int] = []
        groups: set[int] = set()
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit() or int(proc.name) in daemons or int(proc.name) == os.getpid():
                continue
            try:
                environ = (proc / "environ").read_bytes()
            except OSError:
                continue
            if mine in environ.split(b"\0"):
                try:
                    groups.add(os.getpgid(int(proc.name)))
                    os.kill(int(proc.name), signal.SIGKILL)
                    killed.append(int(proc.name))
                except ProcessLookupError:
                    pass
        for group in groups - ours:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(group, signal.SIGKILL)
        return killed

    def log(self, name: str) -> str:
        path = self.dir / "log" / name
        return path.read_text(errors="replace")[-3000:] if path.exists() else ""

    def _wait(self, check: object, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:  # external daemons: poll with a deadline
            for name, proc in self.procs.items():
                if proc.poll() is not None and name not in NODES:
                    raise RuntimeError(f"{name} exited with {proc.returncode}:\n{self.log(name + '.out')}")
            if check():  # type: ignore[operator]
                return
            time.sleep(0.1)
        raise TimeoutError(f"slurm test cluster: {what} not within {timeout} s\n{self.log('slurmctld.log')}")

    def stop(self) -> None:
        """Cancel the jobs, then stop exactly the daemons started here (SIGTERM, then SIGKILL), by PID."""
        if self.procs.get("slurmctld") is not None and self.procs["slurmctld"].poll() is None:
            for node in NODES:
                self.start_node(node)  # a killed node's steps end only through its slurmd
            try:
                self.cancel_all(30.0)
            except (TimeoutError, RuntimeError, subprocess.TimeoutExpired):
                pass
        self.reap_strays()
        for name in (*NODES, "slurmctld", "munged"):
            proc = self.procs.get(name)
            if proc is None or proc.poll() is not None:
                continue
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.send_signal(signal.SIGKILL)
                proc.wait(5)
        shutil.rmtree(self.dir, ignore_errors=True)
