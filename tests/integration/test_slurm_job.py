"""The Slurm job on paper: the script specdash writes, and reading squeue/scontrol (including garbage and hostile
text), without a cluster (the real one runs in tests/integration/test_slurm.py)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from specdash import config
from specdash.config import HostConfig, ModeConfig, SlurmConfig
from specdash.engines.registry import names
from specdash.errors import SpecdashError, UsageError
from specdash.server.launch import launch_env
from specdash.server.slurm import split_label
from specdash.server.slurm_job import (
    JobState,
    end_reason,
    head_mark,
    job_env,
    job_script,
    parse_elapsed,
    parse_gpu_after,
    parse_scontrol,
    parse_squeue,
    queue_position,
    rank_command,
    rank_failures,
)

HOST = HostConfig(
    name="login",
    address="me@login",
    workdir="~/work dir",
    slurm=SlurmConfig(
        partition="gpu", nodes=2, gpus_per_node=8, time_limit="04:00:00", account="lab", sbatch=("--qos=high",)
    ),
)
SGLANG = ModeConfig(name="eagle3", engine="sglang", model="/m/kimi k2", port=30000, args=("--tp", "16"))
VLLM = ModeConfig(name="base", engine="vllm", model="/m/llama", port=8000)


def test_the_job_script_asks_for_what_the_config_says_and_starts_one_srun_step_per_node() -> None:
    script = job_script(SGLANG, HOST, {"A": "x y", "HF_TOKEN": "s3cret"}, "specdash-eagle3")
    header = [line for line in script.splitlines() if line.startswith("#SBATCH")]
    assert header == [
        "#SBATCH --job-name=specdash-eagle3",
        "#SBATCH --nodes=2",
        "#SBATCH --ntasks-per-node=1",
        "#SBATCH --no-requeue",
        "#SBATCH --partition=gpu",
        "#SBATCH --account=lab",
        "#SBATCH --time=04:00:00",
        "#SBATCH --gpus-per-node=8",
        "#SBATCH --qos=high",
    ]
    assert "export A='x y'" in script
    assert "srun --label --kill-on-bad-exit=1 --nodes=2 --ntasks=2" in script
    assert "cd \"$HOME\"/'work dir' || exit 12" in script
    assert subprocess.run(["bash", "-n"], input=script, text=True).returncode == 0


def rank_argv(command: str, rank: int, head: str = "10.0.0.1") -> list[str]:
    """What bash runs for `rank` (the engine's argv printed instead of run)."""
    text = command.replace('\n"${engine[@]}"\n', "\nprintf '%s\\n' \"${engine[@]}\"; exit 0\n")
    out = subprocess.run(
        ["bash", "-c", text], env={"SLURM_NODEID": str(rank), "HEAD_ADDR": head}, capture_output=True, text=True
    )
    return out.stdout.splitlines()


def test_sglang_ranks_get_nnodes_node_rank_and_the_head_as_dist_init_addr() -> None:
    command = rank_command(SGLANG, HOST, 2, 29500)
    head, worker = rank_argv(command, 0), rank_argv(command, 1)
    assert head[:5] == ["python3", "-m", "sglang.launch_server", "--model-path", "/m/kimi k2"]
    assert head[5:] == [
        "--host",
        "10.0.0.1",
        "--port",
        "30000",
        "--tp",
        "16",
        "--nnodes",
        "2",
        "--node-rank",
        "0",
        "--dist-init-addr",
        "10.0.0.1:29500",
    ]
    assert worker[-6:] == ["--nnodes", "2", "--node-rank", "1", "--dist-init-addr", "10.0.0.1:29500"]


def test_vllm_workers_are_headless_and_get_the_master_address() -> None:
    command = rank_command(VLLM, HOST, 2, 29501)
    head, worker = rank_argv(command, 0), rank_argv(command, 1)
    assert "--headless" not in head and worker[-1] == "--headless"
    assert head[-8:] == ["--nnodes", "2", "--node-rank", "0", "--master-addr", "10.0.0.1", "--master-port", "29501"]


def test_a_multi_node_vllm_job_does_not_pin_its_ranks_to_loopback() -> None:
    """VLLM_HOST_IP=127.0.0.1 keeps one box's sockets local; across nodes each rank must give its own address."""
    assert job_env(VLLM, HOST, launch_env(VLLM, HOST), 1)["VLLM_HOST_IP"] == "127.0.0.1"
    assert "VLLM_HOST_IP" not in job_env(VLLM, HOST, launch_env(VLLM, HOST), 2)
    pinned = ModeConfig(name="base", engine="vllm", model="/m/llama", port=8000, env={"VLLM_HOST_IP": "10.1.2.3"})
    assert job_env(pinned, HOST, launch_env(pinned, HOST), 2)["VLLM_HOST_IP"] == "10.1.2.3"  # the user's own


def test_a_head_address_with_shell_text_stays_one_argument() -> None:
    argv = rank_argv(rank_command(SGLANG, HOST, 2, 29500), 0, head="$(touch /tmp/x); a b")
    assert "$(touch /tmp/x); a b:29500" in argv


SQ = "1234|PENDING|Resources||me|0:00|gpu\n"


def test_squeue_lines_read_from_the_format_string() -> None:
    job = parse_squeue(SQ + "99|RUNNING|None|n[1-2]|bob|1-02:03:04|gpu\n", "1234", "login")
    assert job == JobState("1234", "PENDING", "Resources", "", "me", 0.0, "gpu")
    assert job.queued and job.live
    running = parse_squeue(SQ + "99|RUNNING|None|n[1-2]|bob|1-02:03:04|gpu\n", "99", "login")
    assert running is not None and running.elapsed_s == 93784.0 and running.nodes == "n[1-2]"
    assert parse_squeue("", "1234", "login") is None


@pytest.mark.parametrize(
    "text",
    [
        "garbage\n",
        "1234|PENDING|Resources|me|0:00|gpu\n",  # a field missing
        "1234|pending; rm -rf|x||me|0:00|gpu\n",  # not a state word
        "12a4|PENDING|Resources||me|0:00|gpu\n",
        "1234|PENDING|Resources|n1\x1b[2J|me|0:00|gpu\n",  # a terminal escape in a node list
        "1234|PENDING|Resources||me|soon|gpu\n",
    ],
)
def test_garbage_or_hostile_squeue_text_is_one_clear_error_with_the_text_escaped(text: str) -> None:
    with pytest.raises(SpecdashError) as err:
        parse_squeue(text, "1234", "login")
    message = err.value.message
    assert message.startswith("unreadable answer from squeue on login:")
    assert "\x1b" not in message and "not changed" in message


def test_a_reason_with_escapes_is_shown_escaped() -> None:
    job = parse_squeue("7|PENDING|Res\x1b]0;pwn\x07|  |me|0:00|gpu\n", "7", "login")
    assert job is not None and "\x1b" not in job.reason and "\x07" not in job.reason


def test_scontrol_gives_the_end_state_exit_code_and_reason() -> None:
    line = (
        "JobId=77 JobName=specdash-base UserId=me(1000) GroupId=me(1000) JobState=NODE_FAIL Reason=NodeDown "
        "ExitCode=0:9 RunTime=00:01:10 TimeLimit=01:00:00 Partition=gpu NodeList=n[1-2] Command=/a b/c\n"
    )
    job = parse_scontrol(line, "77", "login")
    assert job is not None
    assert (job.state, job.reason, job.exit_code, job.user, job.nodes) == (
        "NODE_FAIL",
        "NodeDown",
        "0:9",
        "me",
        "n[1-2]",
    )
    assert "a node failed (NODE_FAIL, reason NodeDown, nodes n[1-2])" in end_reason(job)
    assert parse_scontrol("slurm_load_jobs error: Invalid job id specified\n", "77", "login") is None
    with pytest.raises(SpecdashError, match="scontrol on login"):
        parse_scontrol("JobId=78 JobState=RUNNING\n", "77", "login")  # another job's answer


@pytest.mark.parametrize(
    ("state", "words"),
    [
        ("TIMEOUT", "hit its time limit"),
        ("OUT_OF_MEMORY", "ran out of host memory"),
        ("PREEMPTED", "preempted"),
        ("CANCELLED", "cancelled outside specdash"),
        ("FAILED", "failed (exit code 1:0"),
        ("COMPLETED", "without a stop from specdash"),
    ],
)
def test_every_end_state_has_its_own_words(state: str, words: str) -> None:
    assert words in end_reason(JobState("5", state, exit_code="1:0"))


def test_srun_lines_name_the_rank_that_died() -> None:
    lines = ["srun: error: n2: task 1: Killed", "srun: error: n1: tasks 0-1: Exited with exit code 1", "other"]
    assert rank_failures(lines) == ["rank 1 on n2: Killed", "ranks 0-1 on n1: Exited with exit code 1"]
    assert end_reason(JobState("5", "FAILED", exit_code="0:9"), rank_failures(lines[:1])).endswith(
        "; rank 1 on n2: Killed"
    )


def test_queue_position_and_text() -> None:
    assert queue_position("5\n1234\n9\n", "1234") == (2, 3)
    assert queue_position("5\n", "1234") == (None, 1)
    job = JobState("1234", "PENDING", "Priority", partition="gpu", position=2, pending_of=3)
    assert job.queue_text() == "queued: Priority (2nd of 3 pending in gpu)"
    stuck = JobState("1", "PENDING", "PartitionTimeLimit", partition="gpu")
    assert "will not start: the job asks for more time than the partition allows" in stuck.queue_text()
    why = "Job's account not known, so it can't use this partition (lab allows lab)"  # slurmctld 22.05's words
    account = JobState("1", "PENDING", why, partition="lab")
    assert account.queue_text("x").endswith(
        "will not start: the account 'x' is not known to Slurm or not allowed in partition lab"
    )
    assert "the job's account (none given)" in JobState("1", "PENDING", "InvalidAccount").queue_text()


def test_labels_heads_and_times() -> None:
    assert split_label("1: [2026-01-01 00:00:00 TP1] Load weight begin") == (
        1,
        "[2026-01-01 00:00:00 TP1] Load weight begin",
    )
    assert split_label("srun: error: n2: task 1: Killed") == (None, "srun: error: n2: task 1: Killed")
    assert split_label("2026-01-01: x") == (None, "2026-01-01: x")
    assert head_mark("specdash: head node n1 at 10.1.2.3") == ("n1", "10.1.2.3")
    assert head_mark("specdash: head node n1 at $(reboot)") is None
    assert parse_elapsed("2:03") == 123.0 and parse_elapsed("1:00:00") == 3600.0 and parse_elapsed("x") is None


def load(tmp_path: Path, host: str) -> config.Config:
    path = tmp_path / "c.toml"
    path.write_text(f'[hosts.login]\naddress = "me@login"\n{host}\n')
    return config.load(path, engines=names())


def test_config_reads_a_slurm_host(tmp_path: Path) -> None:
    cfg = load(
        tmp_path, 'scheduler = "slurm"\n[hosts.login.slurm]\nnodes = 2\npartition = "gpu"\ntime_limit = "1-00:00:00"'
    )
    assert cfg.hosts["login"].slurm == SlurmConfig(partition="gpu", nodes=2, time_limit="1-00:00:00")
    assert load(tmp_path, "").hosts["login"].slurm is None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('scheduler = "pbs"', "[hosts.login] scheduler: 'pbs' is not one of ssh, slurm"),
        ("[hosts.login.slurm]\nnodes = 2", '[hosts.login] slurm: a [slurm] table needs scheduler = "slurm"'),
        ('scheduler = "slurm"\n[hosts.login.slurm]\nnodes = 1.5', "[hosts.login.slurm] nodes: must be a whole number"),
        ('scheduler = "slurm"\n[hosts.login.slurm]\npartition = "gpu;rm"', "[hosts.login.slurm] partition:"),
        ('scheduler = "slurm"\n[hosts.login.slurm]\ntime_limit = "tomorrow"', "not a Slurm time"),
        ('scheduler = "slurm"\n[hosts.login.slurm]\nsbatch = ["--qos=a\\n#SBATCH --x"]', "one sbatch option per item"),
        ('scheduler = "slurm"\n[hosts.login.slurm]\nnode = 2', "[hosts.login.slurm] node: unknown key"),
    ],
)
def test_bad_slurm_config_names_file_table_and_key(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(UsageError) as err:
        load(tmp_path, text)
    assert str(tmp_path / "c.toml") in err.value.message and message in err.value.message


def test_gpu_after_lines_of_another_shape_are_left_out() -> None:
    text = "n1\t0, 1\nn2\t1, 81920\nn2\t[N/A], 3\n\x1b[2Jx\t0, 5\nn3 0, 7\n"
    assert parse_gpu_after(text) == [("n1", 0, 1), ("n2", 1, 81920)]
