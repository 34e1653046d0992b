"""The server-command lookup for `bench --url` runs (`specdash.bench.listener`): the parts that are pure logic.

The kernel's table format and the choice among processes sharing a socket are checked on a /proc-shaped
directory (symlinks `socket:[inode]` like the kernel's); tests/integration/test_listener.py checks the same
against real listening processes.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from specdash.bench.listener import is_loopback, listening_inodes, server_command

HEADER = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
HEADER6 = "  sl  local_address                         remote_address                        st ...\n"


def row(local: str, state: str, inode: int) -> str:
    tail = "00000000:00000000 00:00000000 00000000  1000  0"
    return f"   0: {local} 00000000:0000 {state} {tail} {inode} 1 0 100 0 0 10 0\n"


def fake_proc(tmp: Path, tcp: str, tcp6: str = "", procs: dict[int, tuple[int, list[int], str]] | None = None) -> Path:
    """`procs`: pid -> (ppid, socket inodes among its fds, cmdline with spaces for NULs)."""
    proc = tmp / "proc"
    (proc / "net").mkdir(parents=True)
    (proc / "net" / "tcp").write_text(HEADER + tcp)
    (proc / "net" / "tcp6").write_text(HEADER6 + tcp6)
    for pid, (ppid, inodes, cmdline) in (procs or {}).items():
        d = proc / str(pid)
        (d / "fd").mkdir(parents=True)
        (d / "stat").write_text(f"{pid} (py thon) S {ppid} {pid} {pid} 0 -1\n")
        (d / "cmdline").write_bytes(cmdline.replace(" ", "\0").encode() + b"\0")
        os.symlink("/dev/null", d / "fd" / "0")
        for n, inode in enumerate(inodes, start=3):
            os.symlink(f"socket:[{inode}]", d / "fd" / str(n))
    return proc


@pytest.mark.parametrize(
    ("host", "loopback"),
    [("127.0.0.1", True), ("127.8.9.1", True), ("::1", True), ("[::1]", True), ("::ffff:127.0.0.1", True),
     ("localhost", True), ("LocalHost.", True), ("api.localhost", True), ("10.0.0.5", False), ("::", False),
     ("0.0.0.0", False), ("gpu-box", False), ("localhost.example.com", False), ("", False)],
)  # fmt: skip
def test_is_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_a_remote_url_is_unknown_and_says_why() -> None:
    got = server_command("http://10.0.0.5:30000")
    assert got.argv is None
    assert got.source == (
        "unknown (not started by specdash: 10.0.0.5 is not this machine's loopback; "
        "a remote process's command line is not readable here)"
    )
    assert got.provenance() == {"command_source": got.source}  # no `command` key: nothing pretends to be one


def test_listening_sockets_on_the_port_from_both_tables(tmp_path: Path) -> None:
    tcp = (
        row("0100007F:1F90", "0A", 11)  # 127.0.0.1:8080, listening
        + row("0100007F:1F90", "01", 12)  # an established connection on the same port: not a listener
        + row("00000000:1F91", "0A", 13)  # 0.0.0.0:8081
        + row("0500000A:1F90", "0A", 14)  # 10.0.0.5:8080: not reachable through the loopback
    )
    tcp6 = (
        row("00000000000000000000000001000000:1F90", "0A", 21)  # [::1]:8080
        + row("0000000000000000FFFF00000100007F:1F90", "0A", 22)  # [::ffff:127.0.0.1]:8080
        + row("00000000000000000000000000000000:1F90", "0A", 23)  # [::]:8080
    )
    proc = fake_proc(tmp_path, tcp, tcp6)
    assert listening_inodes(8080, proc) == [
        ("127.0.0.1:8080", 11), ("[::1]:8080", 21), ("[::ffff:127.0.0.1]:8080", 22), ("[::]:8080", 23),
    ]  # fmt: skip
    assert listening_inodes(8081, proc) == [("0.0.0.0:8081", 13)]
    assert listening_inodes(9, proc) == []


def test_forked_workers_share_the_socket_and_the_parent_is_the_server(tmp_path: Path) -> None:
    proc = fake_proc(
        tmp_path,
        row("0100007F:1F90", "0A", 11),
        procs={
            40: (1, [11], "gunicorn app --api-key s3cret-key --port 8080"),
            41: (40, [11], "gunicorn worker"),
            42: (40, [11], "gunicorn worker"),
            50: (1, [99], "something else"),
        },
    )
    got = server_command("http://127.0.0.1:8080", proc)
    assert got.argv == ("gunicorn", "app", "--api-key", "<redacted>", "--port", "8080")
    assert got.source == f"{proc}/40/cmdline: the process listening on 127.0.0.1:8080"
    assert "s3cret-key" not in repr(got.provenance())


def test_a_forwarder_holding_the_port_is_not_the_server(tmp_path: Path) -> None:
    proc = fake_proc(
        tmp_path, row("0100007F:1F90", "0A", 11), procs={7: (1, [11], "/usr/bin/ssh -N -L 8080:127.0.0.1:30000 gpu")}
    )
    got = server_command("http://localhost:8080", proc)
    assert got.argv is None
    assert got.source == "unknown (not started by specdash: port 8080 is relayed by ssh (pid 7) to a server elsewhere)"


def test_a_listener_whose_process_is_not_found(tmp_path: Path) -> None:
    proc = fake_proc(tmp_path, row("0100007F:1F90", "0A", 11), procs={7: (1, [12], "other")})
    got = server_command("http://127.0.0.1:8080", proc)
    assert got.argv is None and got.source.startswith("unknown (not started by specdash: found the socket listening")
    nothing = server_command("http://127.0.0.1:8081", proc)
    assert nothing.source.startswith("unknown (not started by specdash: no process in this network namespace listens")
    no_proc = server_command("http://127.0.0.1:8080", tmp_path / "nowhere")
    assert no_proc.argv is None and "no " in no_proc.source and "/net/tcp on this system" in no_proc.source
