"""Tagging streamed remote commands so their leftovers can be reaped after a reconnect.

Closing a non-PTY channel does not reliably stop a remote `tail -F`, and a dropped connection leaves it
running. So every streamed command is started through a small wrapper that

1. records its PID in `~/.specdash/procs/<client>/<generation>.<pid>` (client = one `SSHHost` instance,
   generation = which of its connections started it; private: directory 0700, file 0600),
2. `exec`s a shell with `SPECDASH_TAG=<client>.<generation>` in its environment, which
3. prints `specdash-stream-pid <pid>` as its first line, then `exec`s the command (same PID).

sshd starts each exec channel's shell in a new session, so that PID is also the process group id, and
killing `-PID` takes the command's children along. Before killing, the reaper checks that the PID still
carries our tag in `/proc/<pid>/environ`, so a recycled PID belonging to someone else is never touched.

A *detached* command (`wrap_detached`: the probe agent, which must outlive a dropped connection and be found
again after the reconnect) is tagged `<client>.d`, with pidfile `d.<pid>`, and runs in a session of its own
with no channel attached. The reap after a reconnect leaves it alone (it ends by itself); closing the
`SSHHost` reaps it like the rest.
"""

from __future__ import annotations

import shlex

PROC_DIR = ".specdash/procs"
"""Pidfile directory, relative to the remote user's home."""
PID_MARKER = "specdash-stream-pid"
"""First line a wrapped command prints: the marker, a space, and the PID."""
DETACHED = "d"
"""The generation part of a detached command's tag and pidfile name."""
TERM_GRACE_S = 2.0
"""How long the reaper waits after SIGTERM before SIGKILL of the group."""


def wrap_streamed(command: str, client_id: str, generation: int) -> str:
    """The shell command that runs `command` tagged (see the module docstring)."""
    tag = f"{client_id}.{generation}"
    announce = f'echo {PID_MARKER} $$; exec sh -c "$1"'
    return (
        f'd="$HOME/{PROC_DIR}/{client_id}"; (umask 077; mkdir -p "$d" && echo $$ > "$d/{generation}.$$"); '
        # The marker comes from the exec'd shell: by then /proc/PID/environ carries the tag, so a reap
        # right after the marker finds it (an `export` only reaches environ at the next exec).
        f"exec env SPECDASH_TAG={tag} sh -c {shlex.quote(announce)} "
        f"sh {shlex.quote(command)}"
    )


def wrap_detached(command: str, client_id: str, log: str) -> str:
    """The shell command that starts `command` tagged and detached (its own session, stdin from /dev/null,
    stdout and stderr appended to `log`) and prints its PID once the pidfile is written."""
    inner = 'echo $$ > "$1/d.$$"; echo $$; exec sh -c "$2" </dev/null >>"$3" 2>&1'
    return (
        # The `&` applies to `setsid` alone: a backgrounded `a && b` list would be a subshell holding stdout.
        f'd="$HOME/{PROC_DIR}/{client_id}"; (umask 077; mkdir -p "$d") || exit 1; '
        f"setsid env SPECDASH_TAG={client_id}.{DETACHED} sh -c {shlex.quote(inner)} "
        f'sh "$d" {shlex.quote(command)} {shlex.quote(log)} </dev/null &'
    )


def reap_script(client_id: str, *, keep_generation: int | None = None, only_pid: int | None = None) -> str:
    """A shell script that kills tagged process groups of `client_id` and prints each killed PID.

    Args:
        client_id: Whose pidfiles to look at.
        keep_generation: Leave this generation's processes alone (the live connection's), and the detached ones.
        only_pid: Look at this PID's pidfile only (cleanup after one stream ends).

    Pidfiles of processes that are gone are removed either way.
    """
    skip_live = (
        f'[ "$gen" = {keep_generation} ] && continue; [ "$gen" = {DETACHED} ] && continue; '
        if keep_generation is not None
        else ""
    )
    pick_one = f'[ "$pid" = {only_pid} ] || continue; ' if only_pid is not None else ""
    rounds = int(TERM_GRACE_S / 0.1)
    # The grace loop checks only the leader's state (Z = zombie counts as gone: our PID 1 may not reap).
    return (
        f'd="$HOME/{PROC_DIR}/{client_id}"; [ -d "$d" ] || exit 0; victims=""; '
        'for f in "$d"/*.*; do [ -e "$f" ] || continue; b=${f##*/}; gen=${b%%.*}; pid=${b#*.}; '
        f"{skip_live}{pick_one}"
        f'if grep -qz "^SPECDASH_TAG={client_id}.$gen\\$" /proc/"$pid"/environ 2>/dev/null; then '
        'kill -TERM -- -"$pid" 2>/dev/null; victims="$victims $pid"; echo "$pid"; fi; rm -f "$f"; done; '
        'alive() { s=$(sed -n "s/.*) \\(.\\).*/\\1/p" /proc/"$1"/stat 2>/dev/null); [ -n "$s" ] && [ "$s" != Z ]; }; '
        f'i=0; while [ -n "$victims" ] && [ $i -lt {rounds} ]; do left=""; '
        'for p in $victims; do alive "$p" && left="$left $p"; done; victims=$left; '
        '[ -n "$victims" ] && sleep 0.1; i=$((i+1)); done; '
        'for p in $victims; do kill -KILL -- -"$p" 2>/dev/null; done; exit 0'
    )
