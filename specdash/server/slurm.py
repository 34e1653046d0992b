"""A Slurm host: a login node reached over SSH, where a mode starts as a batch job (`scheduler = "slurm"`).

`SlurmLifecycle` has `Lifecycle`'s methods (`current`, `start`, `members`, `stop`), so `RemoteSession` drives a
job as it drives a process; `SlurmWatch` is `ServerWatch` with the job's state in place of the process's:

- start: the job script and `rank.sh` (`server.slurm_job`) are written to a run directory on the shared
  filesystem and submitted there with `sbatch --parsable`; the run id goes to `STATE_DIR/slurm/current`, so any
  specdash attaches to the recorded job after a reconnect (`adopt_job` records a job someone started by hand,
  after checking it is the SSH user's);
- state: `squeue` with an explicit format string (`slurm_job.SQUEUE_FORMAT`) and `scontrol -o show job`, one
  command per poll; while the job pends, the status says Slurm's reason and the queue position; its queue wait
  is kept apart from the startup (the startup's clock starts when the job runs);
- log: the job's output file followed over the login node's connection (`LogFollower`); `srun --label`'s rank
  prefix is taken off for the startup tracker (the log view keeps it), each rank also has a tracker of its own,
  and the slowest rank's phase and progress drive the bar;
- crash: the job ending without a stop from specdash, with Slurm's state and reason and srun's lines about the
  ranks that died (`slurm_job.end_reason`);
- stop: `scancel` (Slurm sends SIGTERM, then SIGKILL after its KillWait), confirmed by the job leaving the live
  states; only a job recorded by specdash (launched or adopted) is ever cancelled. Then what each node's GPUs
  held once the engine had exited, where nvidia-smi answers there: the rank script's own last look
  (`slurm_job.GPU_AFTER`; no step can run on the nodes after the job's end), a GPU still holding memory a warning;
- port: the head node's HTTP port, forwarded through the login node (`RunRecord.server_host`);
- probe: the sweep's probe agent runs on the head node, as a step of the job (`step_argv`: `srun --jobid=JOB
  --overlap --nodelist=HEAD`), against the head node's address; its records come back through the shared home.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import secrets
import shlex
import time
import uuid
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from specdash.config import HostConfig, ModeConfig, SlurmConfig
from specdash.core.events import Notice, ServerStatus, SessionEvent
from specdash.core.startup import StartupTracker
from specdash.core.startup_events import ClassifiedLine, Crashed, StartupEvent
from specdash.core.stuck import StuckPolicy, stuck_limits
from specdash.core.timeline import Timeline
from specdash.errors import SpecdashError
from specdash.phases import CrashInfo, Phase, Progress
from specdash.redact import redact_argv
from specdash.remote.host import Host
from specdash.remote.ssh import SSHHost
from specdash.remote.ssherror import SSHError
from specdash.safetext import escape_controls
from specdash.server.launch import launch_env
from specdash.server.lifecycle import Lifecycle, RunRecord, StopReport, damaged_record
from specdash.server.logfollow import RETRY_S
from specdash.server.slurm_job import (
    SQUEUE_FORMAT,
    JobState,
    end_reason,
    engine_argv,
    head_mark,
    is_job_id,
    job_env,
    job_script,
    parse_gpu_after,
    parse_scontrol,
    parse_squeue,
    queue_position,
    rank_command,
    rank_failures,
    shell_path,
)
from specdash.server.watch import LOG_FLUSH_CHARS, ServerWatch

POLL_QUEUED_S = 2.0
"""How often the job's state is read while it pends (one SSH command each)."""
POLL_RUNNING_S = 3.0
"""...and while it runs (the log says more, sooner; this catches the job's end)."""
_SLURM_OWN = ("srun:", "slurmstepd:", "specdash:")
"""Lines of the job's output that no engine rank printed (srun's and slurmstepd's own, the job script's)."""
_NODE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}")
"""A Slurm node name as the job script printed it (nothing else is passed to srun's --nodelist)."""
STOP_CONFIRM_S = 60.0
"""After `scancel`, how long (beyond the mode's grace) the job may take to leave the live states."""

_EXPAND = r"""
expand() {
  case "$1" in
    "~") printf '%s' "$HOME";;
    "~/"*) printf '%s/%s' "$HOME" "${1#\~/}";;
    *) printf '%s' "$1";;
  esac
}
"""
"""`~` and `~/x` of a config path on the host's side (the path itself arrives as a literal argument)."""

_SUBMIT = (
    _EXPAND
    + r"""
set -u
umask 077
out_dir=$(expand "$1"); state=$(expand "$2"); run=$3
mkdir -p "$out_dir/$run" "$state/slurm" || { echo "$TAG nodir $out_dir/$run"; exit 14; }
cd "$out_dir/$run" || exit 14
{ printf '%s' "$4" > job.sh && printf '%s' "$5" > rank.sh && printf '%s' "$6" > run.json.new &&
  mv -f run.json.new run.json; } ||
  { echo "$TAG nodir $PWD"; exit 14; }
shift 6
if ! answer=$(env "$@" sbatch --parsable --output="$PWD/job.out" job.sh 2>&1); then
  printf '%s refused %s\n' "$TAG" "$(printf '%s' "$answer" | tr '\n' ' ')"; exit 3
fi
{ printf '%s\n' "$run" > "$state/slurm/current.new" && mv -f "$state/slurm/current.new" "$state/slurm/current"; } ||
  echo "$TAG nocurrent $state/slurm/current"
printf '%s job %s\n%s dir %s\n' "$TAG" "$answer" "$TAG" "$PWD"
"""
)

_CURRENT = (
    _EXPAND
    + r"""
set -u
out_dir=$(expand "$1"); state=$(expand "$2"); run=${3:-}
if [ -z "$run" ]; then
  [ -e "$state/slurm/current" ] || { echo "$TAG none"; exit 0; }
  run=$(head -c 200 "$state/slurm/current" 2>/dev/null | head -n 1)
  # `current` is there but empty or garbled: which job it named cannot be told (never "no job")
  case "$run" in ""|*/*|.*|*[!A-Za-z0-9_-]*) echo "$TAG badcurrent"; exit 0;; esac
fi
case "$run" in ""|*/*|.*) echo "$TAG none"; exit 0;; esac
dir="$out_dir/$run"
[ -d "$dir" ] || { echo "$TAG none"; exit 0; }
[ -s "$dir/run.json" ] || { printf '%s id %s\n%s badrecord\n' "$TAG" "$run" "$TAG"; exit 0; }
printf '%s id %s\n' "$TAG" "$run"
printf '%s meta %s\n' "$TAG" "$(head -c 65536 "$dir/run.json" | tr '\n' ' ')"
log=$(sed -n 's/^log //p' "$dir/where" 2>/dev/null | head -n 1); log=${log:-$dir/job.out}
printf '%s log %s %s\n' "$TAG" "$(stat -c %s "$log" 2>/dev/null || echo 0)" "$log"
printf '%s head %s\n' "$TAG" "$(head -c 65536 "$log" 2>/dev/null | grep -a -m 1 'specdash: head node ')"
"""
)

_ADOPT = (
    _EXPAND
    + r"""
set -u
umask 077
out_dir=$(expand "$1"); state=$(expand "$2"); run=$3
mkdir -p "$out_dir/$run" "$state/slurm" || exit 14
{ printf '%s' "$4" > "$out_dir/$run/run.json.new" && mv -f "$out_dir/$run/run.json.new" "$out_dir/$run/run.json" &&
  printf 'log %s\n' "$5" > "$out_dir/$run/where"; } || exit 14
{ printf '%s\n' "$run" > "$state/slurm/current.new" && mv -f "$state/slurm/current.new" "$state/slurm/current"; } ||
  exit 14
echo "$TAG adopted"
"""
)


class SlurmLifecycle(Lifecycle):
    """Batch jobs on one Slurm login node: `Lifecycle`'s methods, each overridden for a job."""

    def __init__(self, host: Host, host_config: HostConfig) -> None:
        super().__init__(host, host_config)
        self.slurm: SlurmConfig = host_config.slurm or SlurmConfig()
        self._env = [f"{k}={v}" for k, v in host_config.env.items()]

    # -- running things on the login node --------------------------------------------------------------

    def _slurm_cmd(self, *argv: str) -> str:
        """A Slurm command with the host's environment (`SLURM_CONF`, `PATH`), every value quoted."""
        return shlex.join(["env", *self._env, *argv]) if self._env else shlex.join(argv)

    async def _script(self, script: str, *args: str, timeout: float = 60.0) -> tuple[int, dict[str, str], str]:
        tag = "@sd-" + secrets.token_hex(6)
        result = await self.host.run(f"TAG={tag} bash -s -- {shlex.join(args)}", timeout=timeout, stdin=script)
        said: dict[str, str] = {}
        for line in result.stdout.split("\n"):
            if line.startswith(tag + " "):
                word, _, rest = line[len(tag) + 1 :].partition(" ")
                said.setdefault(word, rest)
        return result.exit_status, said, result.stderr

    # -- Lifecycle ---------------------------------------------------------------------------------------

    async def current(self, run_id: str = "") -> RunRecord | None:
        """The recorded run (the current one, or `run_id`) with its job's state; None when there is none."""
        status, said, stderr = await self._script(
            _CURRENT, self.slurm.output_dir, self.config.state_dir, *([run_id] if run_id else [])
        )
        if status != 0:
            raise SpecdashError(
                f"cannot read the job record on {self.config.name}: {escape_controls(stderr.strip()[-300:])}"
            )
        if "badcurrent" in said:  # `current` is empty or garbled: which job it named cannot be told
            return damaged_record("?", {})
        if "id" not in said:
            return None
        if "badrecord" in said:  # the run's record is empty or missing: its job cannot be told
            return damaged_record(escape_controls(said["id"]), {})
        try:
            meta = json.loads(said.get("meta", "{}"))
        except (json.JSONDecodeError, RecursionError):
            meta = {}
        if not isinstance(meta, dict):
            meta = {}
        job_id = str(meta.get("job_id", ""))
        size, _, log_path = said.get("log", "0 ").partition(" ")
        head = head_mark(said.get("head", ""))
        if not is_job_id(job_id):  # half-written: nothing of it can be verified or cancelled, nor called "no job"
            return damaged_record(escape_controls(said["id"]), meta)
        job = await self.job(job_id)
        command = meta.get("command", ())
        elapsed = job.elapsed_s if job is not None and not job.queued else 0.0
        return RunRecord(
            id=said["id"],
            mode=escape_controls(str(meta.get("mode", "?"))),
            engine=escape_controls(str(meta.get("engine", "sglang"))),
            port=int(meta["port"]) if isinstance(meta.get("port"), int) else 0,
            pid=0,
            pgid=0,
            started_at=time.time() - elapsed,
            log_path=log_path,
            command=tuple(escape_controls(str(c)) for c in command) if isinstance(command, list) else (),
            alive=job is not None and job.live,
            log_size=int(size) if size.isdigit() else 0,
            adopted=bool(meta.get("adopted", False)),
            job_id=job_id,
            server_host=head[1] if head else "",
            head_node=head[0] if head else "",
            nodes=int(meta["nodes"]) if isinstance(meta.get("nodes"), int) else 1,
        )

    async def start(self, mode: ModeConfig) -> RunRecord:
        """Write the job's files and submit them; refuse while a recorded job of ours still lives."""
        live = await self.current()
        if live is not None and live.damaged:
            raise SpecdashError(
                f"the job record {live.id} on {self.config.name} is damaged (empty or half-written): whether its job "
                f"still runs cannot be told, so nothing was submitted; look with 'squeue --me' there and remove "
                f"{self.config.state_dir}/slurm/current to start anew"
            )
        if live is not None and live.alive:
            raise SpecdashError(
                f"job {live.job_id} ({live.mode}) started by specdash is still live on {self.config.name}; "
                f"attach to it, or stop it first with 'specdash down {self.config.name}'"
            )
        run_id = time.strftime("%Y%m%d-%H%M%S") + "-" + uuid.uuid4().hex[:6]
        env = job_env(mode, self.config, launch_env(mode, self.config), self.slurm.nodes)
        rank = rank_command(mode, self.config, self.slurm.nodes, self.slurm.dist_port)
        script = job_script(mode, self.config, env, f"specdash-{mode.name}")
        meta = {
            "mode": mode.name,
            "engine": mode.engine,
            "port": mode.port,
            "nodes": self.slurm.nodes,
            "command": redact_argv(engine_argv(rank)),
        }
        status, said, stderr = await self._script(
            _SUBMIT, self.slurm.output_dir, self.config.state_dir, run_id, script, rank, "{}", *self._env
        )
        where = f"on {self.config.name}"
        if status == 3:
            answer = escape_controls(said.get("refused", "").strip())[:400]
            raise SpecdashError(f"sbatch refused the job for {mode.name!r} {where}: {answer}; nothing was started")
        if status == 14:
            raise SpecdashError(f"cannot write the job's files {escape_controls(said.get('nodir', ''))} {where}")
        answer = said.get("job", "").strip().partition(";")[0]
        if status != 0 or not is_job_id(answer):
            shown = escape_controls((answer or stderr).strip()[-300:])
            raise SpecdashError(f"submitting {mode.name!r} {where} failed: {shown or f'exit status {status}'}")
        meta["job_id"] = answer
        await self._write_meta(run_id, meta)
        if "nocurrent" in said:
            raise SpecdashError(
                f"job {answer} was submitted {where} but {escape_controls(said['nocurrent'])} could not be written: "
                f"specdash will not find it again; 'scancel {answer}' there if it is not wanted"
            )
        record = await self.current(run_id)
        if record is None:
            raise SpecdashError(f"job {answer} was submitted {where} but its record cannot be read back")
        return replace(record, started_at=time.time(), alive=True)

    async def _write_meta(self, run_id: str, meta: dict[str, object]) -> None:
        command = (
            f"umask 077; d={shell_path(self.slurm.output_dir)}/{shlex.quote(run_id)}; "
            f'cat > "$d/run.json.new" && mv "$d/run.json.new" "$d/run.json"'
        )
        result = await self.host.run(command, stdin=json.dumps(meta))
        if not result.ok:
            raise SpecdashError(f"cannot record job {meta.get('job_id')} on {self.config.name}: {result.stderr[-200:]}")

    async def job(self, job_id: str) -> JobState | None:
        """The job's state (squeue, then scontrol for its exit code and end reason); None when Slurm has
        forgotten it. Its queue position too while it pends."""
        if not is_job_id(job_id):
            raise SpecdashError(f"{job_id!r} is not a Slurm job id")
        tag = "@sd-" + secrets.token_hex(6)
        parts = [
            self._slurm_cmd("squeue", "--noheader", "--states=all", f"--jobs={job_id}", f"--format={SQUEUE_FORMAT}"),
            self._slurm_cmd("scontrol", "-o", "show", "job", job_id),
            self._slurm_cmd("squeue", "--noheader", "--states=PENDING", "--sort=-p,i", "--format=%i|%P"),
        ]
        command = "; ".join(f"printf '%s\\n' {tag}-{n}; {p} 2>&1" for n, p in enumerate(parts))
        result = await self.host.run(command, timeout=30.0)
        sections: dict[int, list[str]] = {}
        current = -1
        for line in result.stdout.split("\n"):
            if line.startswith(tag + "-") and line[len(tag) + 1 :].isdigit():
                current = int(line[len(tag) + 1 :])
                sections[current] = []
            elif current >= 0:
                sections[current].append(line)
        squeue_text = "\n".join(sections.get(0, []))
        if "slurm_load_jobs error" in squeue_text or "Invalid job id" in squeue_text:
            squeue_text = ""  # squeue's own word for a job it does not know (purged): scontrol below decides
        state = parse_squeue(squeue_text, job_id, self.config.name)
        detail = parse_scontrol("\n".join(sections.get(1, [])), job_id, self.config.name)
        if state is None:
            state = detail
        elif detail is not None:
            state = replace(state, exit_code=detail.exit_code, reason=state.reason or detail.reason)
        if state is not None and state.queued:
            pending = [ln.split("|") for ln in sections.get(2, [])]
            same = "\n".join(f[0] for f in pending if len(f) == 2 and f[1] == state.partition)
            position, count = queue_position(same, job_id)
            state = replace(state, position=position, pending_of=count)
        return state

    async def members(self, record: RunRecord) -> list[str]:
        """What of the job still holds its allocation: `job ID (STATE) on NODES`, or nothing."""
        job = await self.job(record.job_id)
        if job is None or not job.live:
            return []
        return [f"job {job.job_id} ({job.state}) on {job.nodes or 'no node yet'}"]

    async def stop(self, record: RunRecord, grace: float = 30.0) -> StopReport:
        """`scancel` the recorded job, then wait for it to leave the live states."""
        if not record.job_id or not is_job_id(record.job_id):
            raise SpecdashError(f"run {record.id} on {self.config.name} has no job id of ours; nothing was cancelled")
        began = time.monotonic()
        report = StopReport(run_id=escape_controls(record.id))
        job = await self.job(record.job_id)
        if job is None or not job.live:
            report.seconds = time.monotonic() - began
            return report
        report.members.append(f"job {job.job_id} ({job.state}) on {job.nodes or 'no node yet'}")
        result = await self.host.run(self._slurm_cmd("scancel", record.job_id), timeout=30.0)
        if not result.ok:
            raise SpecdashError(
                f"scancel {record.job_id} on {self.config.name} failed: "
                f"{escape_controls(result.stderr.strip()[-300:]) or result.exit_status}"
            )
        deadline = time.monotonic() + grace + STOP_CONFIRM_S
        while time.monotonic() < deadline:
            job = await self.job(record.job_id)
            if job is None or not job.live:
                break
            await asyncio.sleep(0.5)
        else:
            report.survivors.append(f"job {record.job_id} still {job.state if job else '?'} after scancel")
        report.was_running = True
        with contextlib.suppress(SSHError):
            report.gpu_after = await self.gpu_after(record)
        report.seconds = time.monotonic() - began
        return report

    def step_argv(self, record: RunRecord) -> list[str]:
        """The words that run a command as a step of `record`'s job on its head node, beside the engine's step
        (`--overlap`: it shares the job's CPUs, memory and GPUs instead of waiting for them); empty when the job
        or its head node is not known yet. The probe agent runs under these (`HostRunner.launch`)."""
        if not is_job_id(record.job_id) or not _NODE.fullmatch(record.head_node):
            return []
        srun = ["srun", f"--jobid={record.job_id}", "--overlap", "--nodes=1", "--ntasks=1"]
        srun += [f"--nodelist={record.head_node}", "--job-name=specdash-probe", "--quiet"]
        return ["env", *self._env, *srun] if self._env else srun

    async def gpu_after(self, record: RunRecord) -> list[tuple[str, int, int]]:
        """What each node's GPUs held once the job's engine had exited (node, GPU, MiB): the rank scripts' last
        look (`slurm_job.GPU_AFTER`), where nvidia-smi answers on the node; empty where it does not."""
        run = shlex.quote(record.id) if record.id.replace("-", "").isalnum() else ""
        if not run:
            return []
        command = (
            f"d={shell_path(self.slurm.output_dir)}/{run}; "
            'for f in "$d"/gpu-after.*; do [ -f "$f" ] || continue; n=${f##*/gpu-after.}; '
            'head -c 4096 "$f" | sed "s/^/$n\t/"; done'
        )
        result = await self.host.run(command, timeout=30.0)
        return parse_gpu_after(result.stdout)

    async def adopt_job(self, job_id: str, mode: str, engine: str, port: int) -> RunRecord:
        """Record a job someone started by hand as ours (after checking it is the SSH user's and live)."""
        job = await self.job(job_id)
        where = f"on {self.config.name}"
        if job is None:
            raise SpecdashError(f"no job {job_id} {where} (squeue and scontrol do not know it)")
        me = (await self.host.run("id -un", timeout=15.0)).stdout.strip().splitlines()
        if not me or job.user != me[-1]:
            raise SpecdashError(
                f"job {job_id} {where} belongs to {job.user or 'someone else'}, not to {me[-1] if me else 'us'}; "
                "specdash adopts (and may cancel) only your own jobs"
            )
        if not job.live:
            raise SpecdashError(f"job {job_id} {where} has ended ({job.state}); nothing to adopt")
        result = await self.host.run(self._slurm_cmd("scontrol", "-o", "show", "job", job_id), timeout=30.0)
        out = next((w[7:] for w in result.stdout.split() if w.startswith("StdOut=")), "")
        if not out.startswith("/"):
            raise SpecdashError(f"job {job_id} {where}: scontrol shows no output file to follow")
        run_id = time.strftime("%Y%m%d-%H%M%S") + "-" + uuid.uuid4().hex[:6]
        meta = {"mode": mode, "engine": engine, "port": port, "job_id": job_id, "adopted": True, "nodes": 0}
        status, _, stderr = await self._script(
            _ADOPT, self.slurm.output_dir, self.config.state_dir, run_id, json.dumps(meta), out
        )
        if status != 0:
            raise SpecdashError(f"cannot record job {job_id} {where}: {escape_controls(stderr.strip()[-200:])}")
        record = await self.current(run_id)
        if record is None:
            raise SpecdashError(f"job {job_id} {where}: its record cannot be read back")
        return record


def split_label(line: str) -> tuple[int | None, str]:
    """`srun --label`'s `N: ` prefix off a line: (rank, the rank's own line); (None, line) without one."""
    head, sep, rest = line.partition(": ")
    if sep and 0 < len(head.strip()) <= 5 and head.strip().isdigit():
        return int(head.strip()), rest
    return None, line


class SlurmWatch(ServerWatch):
    """`ServerWatch` for a batch job: queue, then the engine's startup per rank, then the job's end."""

    def __init__(
        self,
        host: SSHHost,
        record: RunRecord,
        emit: Callable[[SessionEvent], None],
        *,
        lifecycle: SlurmLifecycle,
        stuck: StuckPolicy | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(host, record, emit, stuck=stuck, **kwargs)
        self._limits = stuck_limits(self.history, stuck)
        self.lifecycle = lifecycle
        self.job: JobState | None = None
        self.queued_s: float | None = None
        """How long the job waited in the queue (None until it runs)."""
        self._submitted = self.clock()
        self._running = asyncio.Event()
        self._head_known = asyncio.Event()
        if record.server_host:
            self._head_known.set()
        self._ranks: dict[int, StartupTracker] = {}
        self._rank_since: dict[int, float] = {}
        """When each rank entered the phase its tracker is in (the slowest rank's phase clock, for the ETA)."""
        self._rank_errors: list[str] = []
        self._stuck_told = False
        self._last_rank: int | None = None

    async def _follow_log(self) -> None:
        await self._running.wait()
        async for lines in self.follower.batches():
            now = self.clock()
            labelled: list[tuple[int | None, str]] = []
            for line in lines:
                rank, text = split_label(line)
                if rank is None and self._last_rank is not None and not line.startswith(_SLURM_OWN):
                    # srun labels what follows a newline; a tqdm bar's redraws after a carriage return come
                    # unlabelled within that line: they are the same rank's.
                    rank = self._last_rank
                elif rank is not None:
                    self._last_rank = rank
                labelled.append((rank, text))
            self._rank_errors += rank_failures([text for rank, text in labelled if rank is None])
            events, classified = self.tracker.feed_lines([text for _, text in labelled], now)
            shown: list[ClassifiedLine] = []
            for (rank, _), item in zip(labelled, classified, strict=False):
                if rank is None:
                    shown.append(item)
                    continue
                bar = f"{rank}:{item.bar}" if item.bar else None
                shown.append(replace(item, text=f"{rank}: {item.text}", bar=bar))
            if self.tracker.phase.is_startup:
                for rank, text in labelled:
                    if rank is not None:
                        tracker = self._ranks.get(rank)
                        if tracker is None:
                            tracker = self._ranks[rank] = StartupTracker(self.record.engine, started_at=now)
                            self._rank_since[rank] = now
                        before = tracker.phase
                        tracker.feed_line(text, now)
                        if tracker.phase is not before:
                            self._rank_since[rank] = now
            self._pending_lines.extend(shown)
            self._pending_chars += sum(len(item.text) for item in shown)
            self._handle(events)
            self._log_advanced.set()
            if self._pending_chars > LOG_FLUSH_CHARS:
                self._flush()
            await asyncio.sleep(0)  # a turn for everything else after each piece, as `ServerWatch` does

    async def _liveness(self) -> None:
        poll = POLL_QUEUED_S
        while True:
            try:
                await self.host.wait_connected()
                job = await self.lifecycle.job(self.record.job_id)
            except SSHError:
                await asyncio.sleep(RETRY_S)
                continue
            except SpecdashError as exc:  # garbage from squeue: said once, and read again later
                self.state.note = exc.message
                self._publish()
                await asyncio.sleep(poll)
                continue
            self.job = job
            if job is not None and job.queued:
                self.state.note = job.queue_text(self.lifecycle.slurm.account)
                if "will not start" in self.state.note and not self._stuck_told:
                    self._stuck_told = True
                    where = self.lifecycle.config.name
                    text = f"{self.record.mode}: job {job.job_id} on {where} {self.state.note}"
                    self.emit(Notice(text, "warning", bell=True))
                self._publish()
            elif job is not None and job.live:
                if not self._running.is_set():
                    self._began(job)
                poll = POLL_RUNNING_S
                if not self.record.server_host:
                    await self._find_head()
            else:
                break
            await asyncio.sleep(poll)
        if self._running.is_set():
            await self._catch_up_log(cap=30.0)
        self.state.exited = True
        if not self.state.stopping and self.tracker.crash is None:
            ended = self.job or JobState(self.record.job_id, "GONE", "Slurm no longer knows the job")
            reason = end_reason(ended, self._rank_errors)
            self.state.crash = CrashInfo(reason)
            self.emit(Notice(f"{self.record.mode} crashed: {reason}", "error", bell=True))
        elif self.tracker.crash is not None and self._rank_errors and not self.state.stopping:
            self.state.note = "; ".join(self._rank_errors[:3])
        self._publish()
        self.done.set()

    def _began(self, job: JobState) -> None:
        """The job runs: its queue wait ends here, and the startup's clock starts (the ETA counts from now)."""
        start = self.clock() - job.elapsed_s
        self.queued_s = max(0.0, start - self._submitted) if self.origin.value == "launched" else None
        self.record = replace(self.record, started_at=start)
        self.tracker = StartupTracker(self.record.engine, started_at=start, stuck_limits=self._limits)
        self.timeline = Timeline(engine=self.record.engine, start=start)
        waited = f"; waited {self.queued_s:.0f} s in the queue" if self.queued_s is not None else ""
        self.state.note = f"job {job.job_id} running on {job.nodes}{waited}"
        self._running.set()
        self._publish()

    async def _find_head(self) -> None:
        with contextlib.suppress(SSHError, SpecdashError):
            record = await self.lifecycle.current(self.record.id)
            if record is not None and record.server_host:
                self.record = replace(self.record, server_host=record.server_host, head_node=record.head_node)
                self._head_known.set()

    async def _health(self) -> None:
        await self._head_known.wait()  # the head node's address comes with the job's first line
        await super()._health()

    def _handle(self, events: list[StartupEvent]) -> None:
        if any(isinstance(e, Crashed) for e in events) and self._rank_errors:
            self.state.note = "; ".join(self._rank_errors[:3])
        super()._handle(events)

    def status(self) -> ServerStatus:
        status = super().status()
        ranks = self.record.nodes or len(self._ranks) or 1
        slowest = self._slowest()
        extra: dict[str, object] = {"job_id": self.record.job_id, "queue_wait_s": self.queued_s, "pid": None}
        if self.job is not None and self.job.queued:
            extra["queued"] = self.state.note
        if status.phase is Phase.READY:
            extra["ranks"] = (ranks, ranks)
        elif self._running.is_set():
            extra["ranks"] = (sum(1 for t in self._ranks.values() if t.phase is not Phase.LAUNCHING), ranks)
        if slowest is not None and status.phase.is_startup:
            rank, phase, progress = slowest
            order = self._order
            if phase in order and status.phase in order and order.index(phase) < order.index(status.phase):
                # The server is as far as its slowest rank: rank 0 may be capturing while rank 1 still loads its
                # weights, and the collective that follows waits for it. That rank's phase, bar and clock.
                since = self._rank_since.get(rank, self.record.started_at)
                extra["phase"] = phase
                extra["progress"] = progress
                extra["phase_started_at"] = since
                extra["note"] = f"slowest: rank {rank} {phase.value}" + (f"; {status.note}" if status.note else "")
                eta = self.eta(phase, since, progress)
                extra["eta_remaining"] = eta.remaining if eta else None
                extra["eta_samples"] = eta.samples if eta else len(self.history)
                extra["eta_spread"] = eta.spread if eta else None
        return replace(status, **extra)  # type: ignore[arg-type]  # the fields named above

    def _slowest(self) -> tuple[int, Phase, Progress | None] | None:
        order = self._order
        worst: tuple[int, Phase, Progress | None] | None = None
        key: tuple[int, float] | None = None
        for rank, tracker in self._ranks.items():
            phase = tracker.phase
            if phase not in order:
                continue
            progress = tracker.progress
            k = (order.index(phase), progress.fraction if progress and progress.total else 0.0)
            if key is None or k < key:
                worst, key = (rank, phase, progress), k
        return worst
