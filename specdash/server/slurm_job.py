"""A mode as a Slurm batch job, on paper: the job script specdash writes, and what Slurm says back.

Pure functions (no I/O); `server.slurm` runs them on the login node.

- `job_files`: the batch script (`#SBATCH` lines from `[hosts.NAME.slurm]`, the launch environment, the head
  node's address found from the allocation) and `rank.sh`, which one `srun --label` step runs once per node
  with the engine's own multi-node flags (`engines.<engine>.multinode_flags`, `--headless`-style worker flags).
- `parse_squeue` / `parse_scontrol`: Slurm's answers, read from explicit format strings (`SQUEUE_FORMAT`) and
  `scontrol -o` key=value lines, never from their JSON (whose shape changes with Slurm's version). Anything that
  does not have the expected shape raises `SpecdashError` naming the command and the host, with the text
  escaped; nothing of it is acted on.
- `end_reason`: why a job that ended counts as a crash, in words (FAILED, TIMEOUT, NODE_FAIL, OUT_OF_MEMORY,
  PREEMPTED, CANCELLED by someone else, a rank that died: `srun: error: NODE: task N: ...`).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from specdash.config import HostConfig, ModeConfig, SlurmConfig
from specdash.engines.registry import get
from specdash.errors import SpecdashError
from specdash.safetext import escape_controls

SQUEUE_FORMAT = "%i|%T|%r|%N|%u|%M|%P"
"""squeue's fields, in this order: job id, state, reason, node list, user, time used, partition."""
_SQUEUE_FIELDS = 7

LIVE_STATES = frozenset({"PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "RESIZING", "REQUEUED"})
"""States in which the job still holds (or waits for) its allocation."""
QUEUED_STATES = frozenset({"PENDING", "CONFIGURING", "REQUEUED"})
"""States before the job's processes run."""
STUCK_REASONS: Mapping[str, str] = {
    "PartitionTimeLimit": "the job asks for more time than the partition allows",
    "PartitionNodeLimit": "the job asks for more nodes than the partition allows",
    "PartitionDown": "the partition is down",
    "PartitionInactive": "the partition is inactive",
    "ReqNodeNotAvail": "a node it needs is not available",
    "InvalidAccount": "the account is not valid",
    "InvalidQOS": "the QOS is not valid",
    "BadConstraints": "its constraints cannot be met",
    "JobHeldAdmin": "an administrator holds it",
    "JobHeldUser": "it is held (scontrol release)",
    "AssocMaxWallDurationPerJobLimit": "the job asks for more time than its association allows",
    "QOSMaxWallDurationPerJobLimit": "the job asks for more time than its QOS allows",
}
"""Pending reasons that do not resolve by waiting: the job will not start as it is."""

_JOB_ID = re.compile(r"\d{1,12}")
_STATE = re.compile(r"[A-Z_]{2,24}")
_NAME = re.compile(r"[A-Za-z0-9_.+\-\[\],()]{0,256}")
_ELAPSED = re.compile(r"(?:(\d+)-)?(?:(\d+):)?(\d+):(\d+)")
_SRUN_ERROR = re.compile(r"srun: error: (?P<node>[^\s:]+): tasks? (?P<tasks>[\d,\-]+): (?P<what>.+)")
_HEAD_MARK = re.compile(r"specdash: head node (?P<node>\S+) at (?P<addr>[A-Za-z0-9.:\-]+)$")


def is_job_id(text: str) -> bool:
    """A plain Slurm job id (digits; array and het jobs are not launched by specdash)."""
    return bool(_JOB_ID.fullmatch(text))


@dataclass(frozen=True)
class JobState:
    """One job as squeue (and scontrol) say it is."""

    job_id: str
    state: str
    """Slurm's state word (`PENDING`, `RUNNING`, `TIMEOUT`...)."""
    reason: str = ""
    """Slurm's reason (`Resources`, `Priority`, `NodeDown`...; `None` when it has none)."""
    nodes: str = ""
    """The node list (`n[1-2]`), empty while pending."""
    user: str = ""
    """The job's owner."""
    elapsed_s: float = 0.0
    """Time used since the job started running."""
    partition: str = ""
    exit_code: str = ""
    """`ExitCode=` of scontrol (`1:0`, `0:9`), once ended."""
    position: int | None = None
    """Place in its partition's queue of pending jobs (1 = next), while pending."""
    pending_of: int = 0
    """How many jobs pend in that partition."""

    @property
    def live(self) -> bool:
        """Still holds or waits for its allocation."""
        return self.state in LIVE_STATES

    @property
    def queued(self) -> bool:
        """Waiting for its allocation (no process of it runs yet)."""
        return self.state in QUEUED_STATES

    def queue_text(self, account: str = "") -> str:
        """`queued: Resources (2nd of 3 in gpu)` for the status line; a reason that never resolves says so, and
        one about the account names `account` (the one the job asked for)."""
        where = ""
        if self.position is not None:
            where = f" ({_ordinal(self.position)} of {self.pending_of} pending in {self.partition or 'its partition'})"
        why = self.reason if self.reason and self.reason != "None" else "waiting"
        stuck = stuck_reason(why)
        if stuck and _about_account(why):
            named = f"the account {account!r}" if account else "the job's account (none given)"
            stuck = f"{named} is not known to Slurm or not allowed in partition {self.partition or '?'}"
        return f"queued: {why}{where}" + (f"; it will not start: {stuck}" if stuck else "")


def _about_account(reason: str) -> bool:
    low = reason.lower()
    return reason == "InvalidAccount" or ("account" in low and ("not known" in low or "can't use" in low))


def stuck_reason(reason: str) -> str | None:
    """What a pending reason that does not resolve by waiting means, in words; None for one that may resolve.

    Besides Slurm's reason codes (STUCK_REASONS), slurmctld's own sentence for a partition whose `AllowAccounts`
    does not take the job's account (`Job's account not known, so it can't use this partition (gpu allows lab)`):
    Slurm 22.05 accepts such a job at `sbatch` and leaves it pending for good."""
    if reason in STUCK_REASONS:
        return STUCK_REASONS[reason]
    if _about_account(reason):
        return "its account is not allowed in the partition"
    return None


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _bad(what: str, host: str, text: str) -> SpecdashError:
    shown = escape_controls(text.strip()[:200]) or "(nothing)"
    return SpecdashError(f"unreadable answer from {what} on {host}: {shown!r}; the job's state is not changed")


def parse_elapsed(text: str) -> float | None:
    """Slurm's `[D-][H:]M:S` as seconds; None when it is not that shape."""
    m = _ELAPSED.fullmatch(text.strip())
    if m is None:
        return None
    days, hours, minutes, seconds = (int(g) if g else 0 for g in m.groups())
    return float(((days * 24 + hours) * 60 + minutes) * 60 + seconds)


def parse_squeue(text: str, job_id: str, host: str) -> JobState | None:
    """The line of `job_id` in `squeue --noheader --format=SQUEUE_FORMAT` output; None when squeue no longer
    lists it. Raises `SpecdashError` on a line of the wrong shape (garbage, a hostile wrapper's text)."""
    for line in text.splitlines():
        if not line.strip():
            continue
        fields = line.split("|")
        if len(fields) != _SQUEUE_FIELDS:
            raise _bad("squeue", host, line)
        jid, state, reason, nodes, user, elapsed, partition = (f.strip() for f in fields)
        if not is_job_id(jid) or not _STATE.fullmatch(state) or not _NAME.fullmatch(nodes):
            raise _bad("squeue", host, line)
        if jid != job_id:
            continue
        used = parse_elapsed(elapsed)
        if used is None or not _NAME.fullmatch(user) or not _NAME.fullmatch(partition):
            raise _bad("squeue", host, line)
        return JobState(jid, state, escape_controls(reason[:120]), nodes, user, used, partition)
    return None


def parse_scontrol(text: str, job_id: str, host: str) -> JobState | None:
    """`scontrol -o show job ID` (one line of `Key=Value` pairs); None when Slurm no longer knows the job."""
    line = next((ln for ln in text.splitlines() if ln.startswith("JobId=")), "")
    if not line:
        if "Invalid job id" in text or not text.strip():
            return None
        raise _bad("scontrol", host, text)

    def value(key: str) -> str:
        m = re.search(rf"(?:^| ){key}=(\S*)", line)
        return m.group(1) if m else ""

    jid, state = value("JobId"), value("JobState")
    if jid != job_id or not _STATE.fullmatch(state):
        raise _bad("scontrol", host, line)
    return JobState(
        jid,
        state,
        escape_controls(value("Reason")[:120]),
        value("NodeList") if _NAME.fullmatch(value("NodeList")) else "",
        escape_controls(value("UserId").partition("(")[0][:64]),
        parse_elapsed(value("RunTime")) or 0.0,
        escape_controls(value("Partition")[:64]),
        exit_code=escape_controls(value("ExitCode")[:16]),
    )


def queue_position(text: str, job_id: str) -> tuple[int | None, int]:
    """Our place among pending job ids listed in priority order (`squeue --sort=-p,i --format=%i`)."""
    ids = [ln.strip() for ln in text.splitlines() if is_job_id(ln.strip())]
    return (ids.index(job_id) + 1 if job_id in ids else None), len(ids)


def rank_failures(lines: Sequence[str]) -> list[str]:
    """srun's own lines about ranks that died: `rank 1 on n2: Killed`."""
    out = []
    for line in lines:
        m = _SRUN_ERROR.search(line)
        if m is not None:
            tasks = m.group("tasks")
            word = "rank" if tasks.isdigit() else "ranks"
            out.append(escape_controls(f"{word} {tasks} on {m.group('node')}: {m.group('what').strip()}"[:200]))
    return out


def head_mark(line: str) -> tuple[str, str] | None:
    """The job script's `specdash: head node NODE at ADDR` line, as (node, address)."""
    m = _HEAD_MARK.search(line.strip())
    return (m.group("node"), m.group("addr")) if m else None


def end_reason(job: JobState, rank_errors: Sequence[str] = ()) -> str:
    """Why an ended job counts as a crash (it ended without a stop from specdash)."""
    ranks = f"; {'; '.join(rank_errors[:3])}" if rank_errors else ""
    reason = f", reason {job.reason}" if job.reason and job.reason != "None" else ""
    match job.state:
        case "TIMEOUT":
            return f"job {job.job_id} hit its time limit (TIMEOUT){ranks}"
        case "NODE_FAIL":
            return f"job {job.job_id}: a node failed (NODE_FAIL{reason}, nodes {job.nodes or '?'}){ranks}"
        case "OUT_OF_MEMORY":
            return f"job {job.job_id} ran out of host memory (OUT_OF_MEMORY){ranks}"
        case "PREEMPTED":
            return f"job {job.job_id} was preempted by another job (PREEMPTED){ranks}"
        case "CANCELLED":
            return f"job {job.job_id} was cancelled outside specdash (scancel by someone else){ranks}"
        case "FAILED":
            return f"job {job.job_id} failed (exit code {job.exit_code or '?'}{reason}){ranks}"
        case "BOOT_FAIL" | "DEADLINE":
            return f"job {job.job_id} ended: {job.state}{reason}{ranks}"
        case _:
            return f"job {job.job_id} ended ({job.state}) without a stop from specdash{ranks}"


# -- the job script -----------------------------------------------------------------------------------------


def shell_path(path: str) -> str:
    """A config path as shell text: `~` and `~/x` from `$HOME`, everything else quoted literally."""
    if path == "~":
        return '"$HOME"'
    if path.startswith("~/"):
        return '"$HOME"/' + shlex.quote(path[2:])
    return shlex.quote(path)


def sbatch_lines(slurm: SlurmConfig, job_name: str) -> list[str]:
    """The `#SBATCH` header (one task per node: each runs one engine rank)."""
    # --no-requeue: a node failure ends the job as NODE_FAIL (reported), instead of Slurm quietly queueing it
    # again for a second load from scratch (an extra `--requeue` in `sbatch` turns that back on).
    lines = [f"--job-name={job_name}", f"--nodes={slurm.nodes}", "--ntasks-per-node=1", "--no-requeue"]
    if slurm.partition:
        lines.append(f"--partition={slurm.partition}")
    if slurm.account:
        lines.append(f"--account={slurm.account}")
    if slurm.time_limit:
        lines.append(f"--time={slurm.time_limit}")
    if slurm.gpus_per_node:
        lines.append(f"--gpus-per-node={slurm.gpus_per_node}")
    lines += list(slurm.sbatch)
    return [f"#SBATCH {line}" for line in lines]


def rank_command(mode: ModeConfig, host: HostConfig, nnodes: int, port: int) -> str:
    """`rank.sh`: the engine's command line for the node `srun` runs it on (`$SLURM_NODEID`), with the head
    node's address (`$HEAD_ADDR`, from the batch script) and the engine's multi-node flags."""
    engine = get(mode.engine)
    launcher = list(mode.launcher) or [host.python, "-m", engine.launch_module]
    base = shlex.join([*launcher, engine.model_flag, mode.model])
    own = shlex.join(["--port", str(mode.port), *mode.args])
    head = '--host "$HEAD_ADDR"'

    def flags(template: Sequence[str]) -> str:
        words = []
        for word in template:
            text = shlex.quote(word.format(nnodes=nnodes, port=port, rank="\0R", head="\0H"))
            words.append(text.replace("\0R", "'\"$rank\"'").replace("\0H", "'\"$HEAD_ADDR\"'"))
        return " ".join(words)

    multi = flags(engine.multinode_flags) if nnodes > 1 else ""
    worker = flags(engine.multinode_worker_flags)
    return "\n".join(
        [
            "#!/bin/bash",
            "# One engine rank per node: srun --label runs this once on every node of the job.",
            'rank="${SLURM_NODEID:?not run by srun}"',
            'if [ "$rank" = 0 ]; then',
            f"  engine=({base} {head} {own} {multi})".replace(" )", ")"),
            "else",
            f"  engine=({base} {head} {own} {multi} {worker})".replace("  )", ")").replace(" )", ")"),
            "fi",
            "# Not exec: this shell stays to look at the GPUs once the engine has gone. Slurm's SIGTERM reaches the",
            "# engine itself (every process of the step); here it only waits for the engine.",
            "trap 'stopping=1' TERM",
            '"${engine[@]}"',
            "code=$?",
            GPU_AFTER,
            '# The engine\'s own end for srun ("task 1: Killed"): a signal is raised again, an exit status returned.',
            'if [ "$code" -gt 128 ] && [ "$code" -lt 160 ]; then trap - TERM; kill -s "$((code - 128))" $$; fi',
            'exit "$code"',
            "",
        ]
    )


GPU_HELD_MIB = 1024
"""A GPU using more than this after the engine exited still holds memory (an idle GPU reports a few MiB)."""

GPU_AFTER = r"""# Where nvidia-smi answers on this node: what its GPUs hold now that the engine has exited, into the run
# directory (specdash reads it after a stop). Up to 3 s for the memory to come back, well within KillWait.
if command -v nvidia-smi >/dev/null 2>&1; then
  ids=${CUDA_VISIBLE_DEVICES:-}
  case "$ids" in *[!0-9,]*) ids=;; esac
  out="${SLURM_SUBMIT_DIR:-.}/gpu-after.${SLURMD_NODENAME:-$(hostname -s)}"
  for _ in 1 2 3 4 5 6; do
    used=$(timeout 10 nvidia-smi ${ids:+--id="$ids"} --query-gpu=index,memory.used --format=csv,noheader,nounits \
      2>/dev/null) || break
    printf '%s\n' "$used" > "$out.new" && mv -f "$out.new" "$out"
    printf '%s\n' "$used" | awk -F', *' -v held=GPU_HELD_MIB '$2 + 0 > held {h = 1} END {exit h}' && break
    sleep 0.5
  done
fi""".replace("GPU_HELD_MIB", str(GPU_HELD_MIB))
"""The rank script's last look at its node's GPUs (the job's own: after its end no step can run there)."""


def engine_argv(rank_script: str) -> list[str]:
    """The head rank's command line in a `rank_command` script (shell words, `$HEAD_ADDR` unexpanded)."""
    line = next(ln.strip() for ln in rank_script.splitlines() if ln.startswith("  engine=("))
    return shlex.split(line.removeprefix("engine=(").removesuffix(")"))


def parse_gpu_after(text: str) -> list[tuple[str, int, int]]:
    """`NODE<TAB>INDEX, MIB` lines (the rank scripts' `gpu-after.NODE` files) as (node, GPU, MiB used);
    lines of another shape are left out (nothing in them is acted on)."""
    out = []
    for line in text.splitlines():
        node, _, reading = line.partition("\t")
        index, _, mib = reading.partition(",")
        if _NAME.fullmatch(node) and node and index.strip().isdigit() and mib.strip().isdigit():
            out.append((node, int(index.strip()), int(mib.strip())))
    return out


def job_env(mode: ModeConfig, host: HostConfig, launch: Mapping[str, str], nnodes: int) -> dict[str, str]:
    """The job's environment from the launch's (`launch_env`). On several nodes an engine's own loopback pin
    (vLLM's `VLLM_HOST_IP=127.0.0.1`, right for one box) is dropped unless the host or the mode set it: each
    rank must advertise its node's address to the others, which vLLM finds itself when the variable is unset."""
    env = dict(launch)
    if nnodes > 1:
        for key in get(mode.engine).launch_env:
            if key not in host.env and key not in mode.env:
                env.pop(key, None)
    return env


def job_script(mode: ModeConfig, host: HostConfig, env: Mapping[str, str], job_name: str) -> str:
    """The batch script: `#SBATCH` header, environment, the head node's address, one srun step per node.

    The script runs in the run directory (`sbatch` is called there: `$SLURM_SUBMIT_DIR`), beside `rank.sh`.
    """
    slurm = host.slurm or SlurmConfig()
    exports = [f"export {k}={shlex.quote(v)}" for k, v in env.items()]
    n = slurm.nodes
    return "\n".join(
        [
            "#!/bin/bash",
            *sbatch_lines(slurm, job_name),
            "# Written by specdash: one engine rank per node, the head node (rank 0) serves HTTP.",
            'RUN_DIR="$SLURM_SUBMIT_DIR"',
            *exports,
            'HEAD="$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)"',
            "HEAD_ADDR=\"$(scontrol -o show node \"$HEAD\" | tr ' ' '\\n' | sed -n 's/^NodeAddr=//p')\"",
            'HEAD_ADDR="${HEAD_ADDR:-$HEAD}"',
            "export HEAD_ADDR",
            'echo "specdash: head node $HEAD at $HEAD_ADDR"',
            f"cd {shell_path(host.workdir)} || exit 12",
            f"exec srun --label --kill-on-bad-exit=1 --nodes={n} --ntasks={n} --ntasks-per-node=1 \\",
            '  bash "$RUN_DIR/rank.sh"',
            "",
        ]
    )
