"""The command line of the server behind a `--url`, for the provenance of runs specdash did not start.

`specdash bench --url URL` measures a server someone else launched. When URL names this machine's loopback, the
process listening on that port is found from the kernel's socket tables (`/proc/net/tcp`, `/proc/net/tcp6`: the
listening socket's inode) and the processes' open files (`/proc/PID/fd/*` -> `socket:[inode]`), and its
`/proc/PID/cmdline` is stored, secrets redacted. Anything else is stored as an explicit
`unknown (not started by specdash: why)`.

Hand-written rather than psutil (not a dependency; `psutil.net_connections` reads the same two files): Linux
only, which is where the servers run; elsewhere the answer is `unknown (... no /proc ...)`.
"""

from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from specdash.redact import redact_argv

LISTEN = "0A"
"""`st` of a listening socket in /proc/net/tcp (TCP_LISTEN)."""
LOOPBACK_NAMES = ("localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback")
"""Host names that mean this machine's loopback (and any `*.localhost`, RFC 6761)."""
FORWARDERS = ("ssh", "autossh", "kubectl", "socat", "docker-proxy", "rootlessport", "slirp4netns", "pasta")
"""Programs that listen on a port to relay it elsewhere (`ssh -L`, `kubectl port-forward`, a container's
published port): their command line is not the server's."""


@dataclass(frozen=True)
class ServerCommand:
    """The server's command line, or why it is unknown."""

    argv: tuple[str, ...] | None
    """The redacted argv; None when unknown."""
    source: str
    """Where `argv` was read (`/proc/PID/cmdline ...`), or `unknown (not started by specdash: why)`."""

    def provenance(self) -> dict[str, Any]:
        """The provenance keys: `command` (when known) and `command_source`."""
        out: dict[str, Any] = {"command_source": self.source}
        if self.argv is not None:
            out["command"] = list(self.argv)
        return out


def unknown(why: str) -> ServerCommand:
    return ServerCommand(None, f"unknown (not started by specdash: {why})")


def is_loopback(host: str) -> bool:
    """True for 127.0.0.0/8, ::1, ::ffff:127.x and the loopback host names."""
    name = host.strip("[]").lower().rstrip(".")
    if name in LOOPBACK_NAMES or name.endswith(".localhost"):
        return True
    try:
        ip = ipaddress.ip_address(name)
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped.is_loopback
    return ip.is_loopback


def _address(hex_addr: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    """A /proc/net/tcp{,6} address: 32-bit words in host (little-endian) byte order."""
    raw = bytes.fromhex(hex_addr)
    words = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    return ipaddress.ip_address(words)


def listening_inodes(port: int, proc: Path = Path("/proc")) -> list[tuple[str, int]]:
    """(`address:port`, socket inode) of every TCP socket listening on `port` on the loopback or every address."""
    found: list[tuple[str, int]] = []
    for table in ("tcp", "tcp6"):
        try:
            lines = (proc / "net" / table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            cells = line.split()
            if len(cells) < 10 or cells[3] != LISTEN:
                continue
            addr_hex, _, port_hex = cells[1].partition(":")
            try:
                if int(port_hex, 16) != port:
                    continue
                addr = _address(addr_hex)
                inode = int(cells[9])
            except ValueError:
                continue
            mapped = addr.ipv4_mapped if isinstance(addr, ipaddress.IPv6Address) else None
            if (mapped or addr).is_loopback or addr.is_unspecified:
                shown = str(addr) if addr.version == 4 else f"[::ffff:{mapped}]" if mapped else f"[{addr}]"
                found.append((f"{shown}:{port}", inode))
    return found


def socket_holders(inodes: set[int], proc: Path = Path("/proc")) -> tuple[list[int], int]:
    """PIDs whose open files include one of the sockets, and how many processes could not be read."""
    wanted = {f"socket:[{i}]" for i in inodes}
    holders: list[int] = []
    unreadable = 0
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fds = os.listdir(entry / "fd")
        except PermissionError:
            unreadable += 1
            continue
        except OSError:  # gone meanwhile
            continue
        for fd in fds:
            try:
                if os.readlink(entry / "fd" / fd) in wanted:
                    holders.append(int(entry.name))
                    break
            except OSError:
                continue
    return sorted(holders), unreadable


def _parent(pid: int, proc: Path) -> int | None:
    try:
        stat = (proc / str(pid) / "stat").read_text()
    except OSError:
        return None
    # `pid (comm) state ppid ...`; comm may hold spaces and parentheses: split after the last ')'.
    fields = stat.rpartition(")")[2].split()
    return int(fields[1]) if len(fields) > 1 and fields[1].isdigit() else None


def server_command(url: str, proc: Path = Path("/proc")) -> ServerCommand:
    """The command line of the process serving `url` (a validated http(s)://HOST:PORT), or why it is unknown."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    if not is_loopback(host):
        return unknown(f"{host} is not this machine's loopback; a remote process's command line is not readable here")
    if not (proc / "net" / "tcp").is_file():
        return unknown(f"no {proc}/net/tcp on this system to find the process listening on port {port}")
    listeners = listening_inodes(port, proc)
    if not listeners:
        return unknown(
            f"no process in this network namespace listens on port {port} (a container or a NAT rule may serve it)"
        )
    holders, unreadable = socket_holders({inode for _, inode in listeners}, proc)
    where = ", ".join(sorted({a for a, _ in listeners}))
    if not holders:
        why = f"{unreadable} processes of other users could not be read" if unreadable else "it has exited"
        return unknown(f"found the socket listening on {where} but not its process: {why}")
    # Forked workers share the listening socket: the server is the holder whose parent does not hold it.
    roots = [p for p in holders if _parent(p, proc) not in holders] or holders
    pid = roots[0]
    try:
        argv = (proc / str(pid) / "cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError as exc:
        return unknown(f"pid {pid} listens on {where}, but its command line is not readable ({exc.strerror})")
    while argv and argv[-1] == "":
        argv.pop()
    if not argv:
        return unknown(f"pid {pid} listens on {where}, but its command line is empty")
    program = os.path.basename(argv[0])
    if program in FORWARDERS:
        return unknown(f"port {port} is relayed by {program} (pid {pid}) to a server elsewhere")
    note = f"{proc / str(pid) / 'cmdline'}: the process listening on {where}"
    return ServerCommand(tuple(str(a) for a in redact_argv(argv)), note)
