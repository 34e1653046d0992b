"""A "remote" host that is really remote: a network namespace behind a veth pair, with its own sshd.

Recipe: reference/environment.md section 5. Per run we take a /30 of our own inside 10.99.0.0/16 (chosen
from our PID, checked against addresses already in use), so parallel CI runs cannot collide:

    root namespace  <- veth (sdr-<id>) ------ veth (sds-<id>) ->  namespace sd-<id>   (sshd inside)
    10.99.X.Y+1/30                                               10.99.X.Y+2/30

Safety nets, added before any address exists, so a removed connected route (link down) never sends test
traffic to the default gateway:

- `blackhole 10.99.0.0/16` (the shared net of the recipe; added if absent and then removed by us only if
  we added it, since a parallel run may rely on it);
- `blackhole <our /30> metric 4000` (ours alone: the connected route (metric 0) wins while the link is
  up, the blackhole once the link is down).

`cut()` sets the root-side veth down (its connected route disappears; packets hit the blackhole), `heal()`
sets it up again (the kernel restores the connected route). Everything is removed by `close()`: sshd by
PID, the namespace (which takes both veth ends along), our blackhole routes.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from itertools import count

from tests.support.sshd import Keys, Sshd

NET = ipaddress.IPv4Network("10.99.0.0/16")
"""The test range: nothing else on our machines uses it."""
_serial = count()


def ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run `ip ARGS`; raise with ip's own message on failure when `check`."""
    done = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=10)
    if check and done.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {done.stderr.strip() or done.returncode}")
    return done


def unavailable() -> str | None:
    """Why network namespaces cannot be used here (the kernel's or ip's words), or None when they can."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    name = f"sdprobe-{os.getpid()}"
    try:
        added = subprocess.run(["ip", "netns", "add", name], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"'ip netns add' failed: {exc}"
    if added.returncode != 0:
        return f"'ip netns add' refused: {added.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=10)
    return None


def _used_addresses() -> set[ipaddress.IPv4Address]:
    out = ip("-o", "-4", "addr", "show").stdout
    used = set()
    for line in out.splitlines():
        words = line.split()
        if "inet" in words:
            used.add(ipaddress.IPv4Interface(words[words.index("inet") + 1]).ip)
    return used


def _pick_subnet(exclude: ipaddress.IPv4Network | None = None) -> ipaddress.IPv4Network:
    """A /30 of 10.99.0.0/16 that no interface uses, starting from one derived from our PID."""
    subnets = list(NET.subnets(new_prefix=30))
    start = (os.getpid() * 7 + next(_serial) * 131) % len(subnets)
    used = _used_addresses()
    for k in range(len(subnets)):
        net = subnets[(start + k) % len(subnets)]
        if net.network_address.packed[2] == 0:
            continue  # 10.99.0.x: the recipe's own example addresses, maybe in someone's manual use
        if net != exclude and not any(addr in net for addr in used):
            return net
    raise RuntimeError("no free /30 left in 10.99.0.0/16")


@dataclass
class Netns:
    """A namespace reachable from the root namespace over a veth pair (see the module docstring)."""

    name: str
    subnet: ipaddress.IPv4Network
    root_if: str
    ns_if: str
    added_shared_blackhole: bool = False
    sshds: list[Sshd] = field(default_factory=list)
    cuts: int = 0
    outer: str | None = None
    """The namespace holding `root_if` (None: the root namespace; else a host behind a jump host)."""
    inner: list[Netns] = field(default_factory=list)
    """Namespaces reachable only through this one (see `behind`)."""

    @property
    def local_addr(self) -> str:
        """Our end (root namespace)."""
        return str(self.subnet.network_address + 1)

    @property
    def addr(self) -> str:
        """The namespace's end: the "remote host" address."""
        return str(self.subnet.network_address + 2)

    @classmethod
    def create(cls) -> Netns:
        """Set up the safety nets, the namespace and the veth pair (see the module docstring)."""
        tag = f"{os.getpid()}{next(_serial)}"
        subnet = _pick_subnet()
        self = cls(f"sd-{tag}", subnet, f"sdr{tag}"[:15], f"sds{tag}"[:15])
        try:
            # Safety nets first, before any route to the test range exists.
            added = ip("route", "add", "blackhole", str(NET), check=False)
            self.added_shared_blackhole = added.returncode == 0
            ip("route", "add", "blackhole", str(subnet), "metric", "4000")
            ip("netns", "add", self.name)
            ip("link", "add", self.root_if, "type", "veth", "peer", "name", self.ns_if)
            ip("link", "set", self.ns_if, "netns", self.name)
            ip("addr", "add", f"{self.local_addr}/30", "dev", self.root_if)
            ip("link", "set", self.root_if, "up")
            ip("-n", self.name, "addr", "add", f"{self.addr}/30", "dev", self.ns_if)
            ip("-n", self.name, "link", "set", self.ns_if, "up")
            ip("-n", self.name, "link", "set", "lo", "up")
        except Exception:
            self.close()
            raise
        return self

    def behind(self) -> Netns:
        """A second namespace linked to this one only: a host reachable through this one as a jump host.

        Its "local" end lives in this namespace, so the root namespace has no route to it at all.
        """
        tag = f"{os.getpid()}{next(_serial)}"
        subnet = _pick_subnet(exclude=self.subnet)
        child = Netns(f"sd-{tag}", subnet, f"sdr{tag}"[:15], f"sds{tag}"[:15], outer=self.name)
        self.inner.append(child)
        ip("netns", "add", child.name)
        ip("-n", self.name, "link", "add", child.root_if, "type", "veth", "peer", "name", child.ns_if)
        ip("-n", self.name, "link", "set", child.ns_if, "netns", child.name)
        ip("-n", self.name, "addr", "add", f"{child.local_addr}/30", "dev", child.root_if)
        ip("-n", self.name, "link", "set", child.root_if, "up")
        ip("-n", child.name, "addr", "add", f"{child.addr}/30", "dev", child.ns_if)
        ip("-n", child.name, "link", "set", child.ns_if, "up")
        ip("-n", child.name, "link", "set", "lo", "up")
        return child

    def _outer(self) -> tuple[str, ...]:
        return ("-n", self.outer) if self.outer else ()

    def start_sshd(self, keys: Keys, name: str = "ns-sshd") -> Sshd:
        """An sshd inside the namespace on `addr`:22 (stopped by `close()`)."""
        server = Sshd(keys, name=f"{name}-{self.name}", listen=self.addr, port=22, netns=self.name)
        self.sshds.append(server)
        return server.start()

    def exec(self, *argv: str, timeout: float = 10) -> subprocess.CompletedProcess[str]:
        """Run a command inside the namespace."""
        command = ["ip", "netns", "exec", self.name, *argv]
        return subprocess.run(command, capture_output=True, text=True, timeout=timeout)

    def pids(self) -> list[int]:
        """Every process inside the namespace (sshd, its sessions, the users' commands)."""
        out = ip("netns", "pids", self.name, check=False).stdout
        return [int(p) for p in out.split() if p.isdigit()]

    def cut(self) -> float:
        """Take the link down (root side); return the monotonic time of the cut."""
        ip(*self._outer(), "link", "set", self.root_if, "down")
        self.cuts += 1
        return time.monotonic()

    def heal(self) -> float:
        """Bring the link back; return the monotonic time."""
        ip(*self._outer(), "link", "set", self.root_if, "up")
        return time.monotonic()

    def close(self) -> None:
        """Stop our sshds by PID, delete the namespace (and the veth pair with it), remove our routes."""
        for child in self.inner:
            child.close()
        for server in self.sshds:
            with contextlib.suppress(Exception):
                server.stop()
        # Whatever a test left inside (its own namespace: every process there is ours) would keep it alive.
        for pid in self.pids():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        ip("netns", "del", self.name, check=False)
        if self.outer:
            return  # no routes of ours in the root namespace
        ip("link", "del", self.root_if, check=False)  # normally gone with its peer already
        ip("route", "del", "blackhole", str(self.subnet), "metric", "4000", check=False)
        if self.added_shared_blackhole:
            ip("route", "del", "blackhole", str(NET), check=False)
