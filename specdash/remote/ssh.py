"""`SSHHost`: one supervised asyncssh connection per host, shared by every command, stream and forward.

Connecting works as OpenSSH users expect: `user@host:port`, aliases and options from `~/.ssh/config`
(HostName, User, Port, IdentityFile, ProxyJump, UserKnownHostsFile), the SSH agent, `-i KEY` and `-J jump`.
Host keys are checked against known_hosts (see `knownhosts.py`); nothing here ever turns that off.

A supervisor task owns the connection: connected -> `wait_closed()` -> Lost -> back off -> reconnect, and
reports each step as an event (`events.py`). It gives up (Failed) only on errors retrying cannot fix
(authentication, host keys, unreadable config). The first `connect()` does not retry: a CLI user who
mistyped a host wants the error now.

Behaviour during an outage:

- `run()` waits for the reconnect within its own timeout, then raises `SSHError(kind=LOST)`. A command
  whose connection drops while it runs raises LOST too; it is never re-sent (it may have had effects).
- `stream()` waits for the connection (no timeout) and raises LOST when it drops mid-stream.
- Forwards die with their connection. Owners of streams and forwards `await host.wait_connected()` and set
  them up again; leftovers of streams started over older connections are reaped on reconnect (`tagging.py`).

Exec channels (runs and streams) share a semaphore below sshd's MaxSessions (10 by default); forwarded
TCP channels do not count against MaxSessions and are not limited. asyncssh logs to
`<state dir>/log/ssh.log`, never to the terminal (Textual owns it).
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import logging
import secrets
from collections.abc import AsyncIterator, Callable, Coroutine
from types import TracebackType
from typing import Any

from specdash.core.lines import LineSplitter
from specdash.remote.connect import Connector, Link, route_asyncssh_logging
from specdash.remote.events import (
    Connected,
    Connecting,
    ConnectionEvent,
    ConnectionState,
    Failed,
    Lost,
    Reconnecting,
)
from specdash.remote.host import RunResult
from specdash.remote.options import SSHOptions
from specdash.remote.ssherror import SSHError, SSHErrorKind
from specdash.remote.sshlib import asyncssh
from specdash.remote.tagging import PID_MARKER, reap_script, wrap_detached, wrap_streamed
from specdash.target import Target, parse_target

__all__ = ["SSHHost", "SSHOptions", "route_asyncssh_logging"]

log = logging.getLogger(__name__)

_READ_CHUNK = 64 * 1024
"""Largest piece `stream_bytes` hands on at a time (a consumer yields to the event loop between pieces)."""


def _drain_size(proc: Any) -> int:
    """How much one read of a channel must be allowed to take so that it empties the channel's buffers.

    Why not read `_READ_CHUNK` at a time: asyncssh 2.24 re-opens a channel's whole receive window as soon as it
    delivers the first of the packets it held while reading was paused, then pauses again with the rest
    still held, so every small read of a full stream let the host send another window on top of what was
    waiting: a stream read slower than it is written grew without bound (112 MB in a log flood under a CPU
    hog; tests/integration/test_ssh_ops.py::test_a_slow_reader_of_a_fast_stream_holds_a_bounded_buffer).
    A read that may take the stream's buffer (its limit is one window) plus the channel's (one window more)
    leaves nothing held at a window update, so the window counts what we hold and the host waits for us.
    """
    window = int(proc.channel.get_recv_window())
    return 2 * window + _READ_CHUNK


def _short(command: str, limit: int = 80) -> str:
    return command if len(command) <= limit else command[: limit - 3] + "..."


_MAX_BANNER = 256 * 1024
"""Most bytes of login-shell output held while looking for a streamed command's PID marker."""


def _find_marker(head: bytes) -> tuple[int, bytes] | None:
    """(PID, the bytes after the marker line) once `head` holds a whole marker line, else None."""
    marker = PID_MARKER.encode() + b" "
    at = 0 if head.startswith(marker) else head.find(b"\n" + marker)
    if at < 0:
        return None
    start = at if at == 0 and head.startswith(marker) else at + 1
    end = head.find(b"\n", start)
    if end < 0:
        return None
    value = head[start + len(marker) : end].strip()
    return (int(value) if value.isdigit() and len(value) < 10 else -1), head[end + 1 :]


class SSHHost:
    """A host reached over one supervised SSH connection (implements `specdash.remote.host.Host`).

    Args:
        target: `[user@]host[:port]` or an alias from the SSH config, or a parsed `Target`.
        options: Connection options; see `SSHOptions`.
        on_event: Called with every `ConnectionEvent`, on the event loop; must not block.

    Raises:
        UsageError: The host string or the jump string is malformed.
    """

    def __init__(
        self,
        target: str | Target,
        options: SSHOptions | None = None,
        *,
        on_event: Callable[[ConnectionEvent], object] | None = None,
    ) -> None:
        self._target = parse_target(target) if isinstance(target, str) else target
        self._name = target.strip() if isinstance(target, str) else str(target)
        self._options = options or SSHOptions()
        self._connector = Connector(self._target, self._options)
        self._on_event = on_event
        self._queues: list[asyncio.Queue[ConnectionEvent]] = []
        self._state = ConnectionState.IDLE
        self._wake = asyncio.Event()
        self._link: Link | None = None
        self._generation = 0
        self._failure: SSHError | None = None
        self._sessions = asyncio.Semaphore(self._options.max_sessions)
        self._supervisor: asyncio.Task[None] | None = None
        self._background: set[asyncio.Task[Any]] = set()
        self._forwards: dict[tuple[str, int], int] = {}
        """(remote host, remote port) -> the local port, kept across reconnects (see `forward`)."""
        self._listeners: dict[tuple[str, int], asyncssh.SSHListener] = {}
        self.client_id = secrets.token_hex(4)
        """Tags the remote processes this instance streams (see `tagging.py`)."""
        self.log_file = route_asyncssh_logging(self._options.log_file)
        """Where asyncssh logs for this host."""

    # -- state and events -------------------------------------------------------------------------------

    @property
    def name(self) -> str:
        """How the user named the host."""
        return self._name

    @property
    def state(self) -> ConnectionState:
        """The connection state now."""
        return self._state

    @property
    def generation(self) -> int:
        """Number of the current connection: 1 for the first, +1 per reconnect (0 before connecting)."""
        return self._generation

    @property
    def failure(self) -> SSHError | None:
        """Why the host is in the FAILED state, else None."""
        return self._failure

    def subscribe(self, maxsize: int = 256) -> asyncio.Queue[ConnectionEvent]:
        """A queue that receives every later event; when full, the oldest event is dropped."""
        queue: asyncio.Queue[ConnectionEvent] = asyncio.Queue(maxsize)
        self._queues.append(queue)
        return queue

    def _emit(self, event: ConnectionEvent) -> None:
        log.info("%s: %s", self._name, event)
        if self._on_event is not None:
            try:
                self._on_event(event)
            except Exception:  # a broken observer must not take the supervisor down
                log.exception("on_event callback failed")
        for queue in self._queues:
            if queue.full():
                queue.get_nowait()
            queue.put_nowait(event)

    def _set_state(self, state: ConnectionState) -> None:
        self._state = state
        # Wake every waiter of the previous event; later waiters wait on the new one (a broadcast).
        self._wake.set()
        self._wake = asyncio.Event()

    async def _connection(self) -> asyncssh.SSHClientConnection:
        """The live connection, waiting (without limit) through CONNECTING/LOST/RECONNECTING."""
        while True:
            if self._state is ConnectionState.CONNECTED and self._link is not None:
                return self._link.conn
            if self._state is ConnectionState.FAILED and self._failure is not None:
                failure = self._failure
                raise SSHError(failure.kind, failure.message, cause_kind=failure.cause_kind)
            if self._state in (ConnectionState.IDLE, ConnectionState.CLOSED):
                what = "closed" if self._state is ConnectionState.CLOSED else "not connected (call connect() first)"
                raise SSHError(SSHErrorKind.CLOSED, f"{self._name}: {what}")
            await self._wake.wait()

    async def wait_connected(self, timeout: float | None = None, *, newer_than: int | None = None) -> None:
        """Return once the host is connected (at once if it is).

        With `newer_than`, only a connection of a later generation counts: an operation that saw its
        connection drop waits for the next one, not for the supervisor to notice the drop.

        Raises:
            SSHError: The host failed for good or was closed (its own kind), or `timeout` seconds passed
                (kind LOST).
        """
        try:
            async with asyncio.timeout(timeout):
                await self._connection()
                while newer_than is not None and self._generation <= newer_than:
                    await self._wake.wait()
                    await self._connection()
        except TimeoutError:
            raise SSHError(
                SSHErrorKind.LOST, f"{self._name}: not connected after {timeout:g} s (state: {self._state})"
            ) from None

    # -- connecting -------------------------------------------------------------------------------------

    async def connect(self) -> None:
        """Connect (once; no retries) and start the supervisor that reconnects after a loss.

        Raises:
            SSHError: The connection could not be made; a `Failed` event carries the same error.
        """
        # From FAILED (and the supervisor gone) connect() tries again: a "retry" key in the UI.
        retry = self._state is ConnectionState.FAILED and (self._supervisor is None or self._supervisor.done())
        if self._state is not ConnectionState.IDLE and not retry:
            await self.wait_connected()
            return
        self._failure = None
        self._set_state(ConnectionState.CONNECTING)
        self._emit(Connecting(self._name, 1))
        try:
            link = await self._attempt()
        except SSHError as exc:
            self._fail(exc)
            raise
        self._adopt(link)
        self._supervisor = asyncio.create_task(self._supervise(), name=f"ssh supervisor {self._name}")

    async def __aenter__(self) -> SSHHost:
        await self.connect()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def _attempt(self) -> Link:
        try:
            return await self._connector.open()
        except SSHError:
            raise
        except Exception as exc:
            # A bug or an asyncssh surprise must still end as a Failed event, not a silently dead supervisor.
            log.exception("%s: unexpected error while connecting", self._name)
            raise SSHError(SSHErrorKind.PROTOCOL, f"{self._name}: unexpected error while connecting: {exc!r}") from exc

    def _adopt(self, link: Link) -> None:
        self._link = link
        self._generation += 1
        self._set_state(ConnectionState.CONNECTED)
        self._emit(Connected(self._name, self._generation))

    def _fail(self, error: SSHError) -> None:
        self._failure = error
        self._set_state(ConnectionState.FAILED)
        self._emit(Failed(self._name, error))

    def _backoff(self, attempt: int) -> float:
        return float(min(self._options.backoff_max, self._options.backoff_initial * 2 ** (attempt - 1)))

    async def _supervise(self) -> None:
        while True:
            link = self._link
            assert link is not None
            await link.conn.wait_closed()
            link.close()  # the jumps outlive a tunnelled connection unless closed
            self._link = None
            for listener in self._listeners.values():
                listener.close()  # asyncssh closes them with the connection; this makes sure the ports are free
            self._listeners.clear()
            self._set_state(ConnectionState.LOST)
            self._emit(Lost(self._name, link.client.reason()))
            attempt, last_error = 0, None
            while True:
                attempt += 1
                delay = self._backoff(attempt)
                self._set_state(ConnectionState.RECONNECTING)
                self._emit(Reconnecting(self._name, attempt, delay, last_error))
                await asyncio.sleep(delay)
                self._set_state(ConnectionState.CONNECTING)
                self._emit(Connecting(self._name, attempt))
                try:
                    new_link = await self._attempt()
                except SSHError as exc:
                    if exc.permanent:
                        self._fail(exc)
                        return
                    last_error = exc.message
                    continue
                await self._relisten(new_link.conn)
                self._adopt(new_link)
                self._spawn(self._reap_quietly())
                break

    def _spawn(self, coro: Coroutine[Any, Any, object]) -> None:
        # Keep a reference: the loop holds tasks only weakly, and close() cancels what is left.
        task = asyncio.create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    # -- operations -------------------------------------------------------------------------------------

    def _operation_error(self, exc: Exception, conn: asyncssh.SSHClientConnection | None, what: str) -> SSHError:
        if isinstance(exc, asyncssh.ChannelOpenError) and conn is not None and not conn.is_closed():
            return SSHError(
                SSHErrorKind.CHANNEL,
                f"{self._name}: the server refused a channel for {_short(what)!r}: {exc.reason} "
                f"(is its MaxSessions below max_sessions={self._options.max_sessions}?)",
            )
        return SSHError(SSHErrorKind.LOST, f"{self._name}: connection lost during {_short(what)!r}: {exc}")

    async def run(self, command: str, *, timeout: float = 30.0, stdin: str | None = None) -> RunResult:
        """Run a shell command to completion on one exec channel.

        Args:
            command: Shell command line (run by the remote user's login shell).
            timeout: Seconds for everything: waiting for a reconnect and a free session, and the command.
            stdin: Text fed to the command's standard input (then EOF).

        Raises:
            SSHError: COMMAND_TIMEOUT, LOST (not back in time, or dropped mid-command; never re-sent),
                CHANNEL (the server refused the session), or the host's failure.
        """
        return await self._run(command, timeout=timeout, stdin=stdin)

    async def _run(self, command: str, *, timeout: float, stdin: str | None = None, limited: bool = True) -> RunResult:
        proc: asyncssh.SSHClientProcess[str] | None = None
        conn: asyncssh.SSHClientConnection | None = None
        session: contextlib.AbstractAsyncContextManager[object] = (
            self._sessions if limited else contextlib.nullcontext()
        )
        try:
            async with asyncio.timeout(timeout):
                await self._connection()
                async with session:
                    conn = await self._connection()
                    proc = await _open_process(conn, command, input=stdin, encoding="utf-8", errors="replace")
                    if stdin == "":
                        # asyncssh sends EOF only after non-empty input: an empty one would leave a reader
                        # of stdin (`cat > file`) waiting until the timeout.
                        proc.stdin.write_eof()
                    done = await proc.wait()
        except TimeoutError:
            if proc is not None:
                raise SSHError(
                    SSHErrorKind.COMMAND_TIMEOUT, f"{self._name}: {_short(command)!r} still running after {timeout:g} s"
                ) from None
            if self._state is ConnectionState.CONNECTED:
                raise SSHError(
                    SSHErrorKind.COMMAND_TIMEOUT,
                    f"{self._name}: no free SSH session within {timeout:g} s for {_short(command)!r}",
                ) from None
            raise SSHError(
                SSHErrorKind.LOST,
                f"{self._name}: connection {self._state}, not back within {timeout:g} s; "
                f"{_short(command)!r} was not run",
            ) from None
        except (OSError, asyncssh.Error) as exc:
            raise self._operation_error(exc, conn, command) from exc
        finally:
            if proc is not None:
                proc.close()
        if done.exit_status is None and done.exit_signal is None:
            # The channel closed without an exit status: the connection went away under the command.
            raise SSHError(SSHErrorKind.LOST, f"{self._name}: connection lost during {_short(command)!r}")
        status = done.exit_status if done.exit_status is not None else -1
        return RunResult(status, str(done.stdout or ""), str(done.stderr or ""))

    async def start_detached(self, command: str, log: str, *, timeout: float = 30.0) -> int:
        """Start `command` tagged and detached from any channel (`tagging.wrap_detached`); return its PID.

        It outlives the connection (the reap after a reconnect spares it, so it can be found again) and is
        reaped by `close()`. Its output is appended to `log` (a path on the host, relative to `~`).

        Raises:
            SSHError: as `run`, or PROTOCOL when the host did not say the PID.
        """
        done = await self.run(f"cd && {wrap_detached(command, self.client_id, log)}", timeout=timeout)
        words = done.stdout.split()
        if done.exit_status != 0 or not words or not words[-1].isdigit():
            raise SSHError(
                SSHErrorKind.PROTOCOL,
                f"{self._name}: could not start {_short(command)!r}: {(done.stderr or done.stdout).strip()[:200]}",
            )
        return int(words[-1])

    async def stream(self, command: str, *, ping_s: float | None = None) -> AsyncIterator[str]:
        """Run a tagged command and yield its output lines (stdout and stderr merged, split on CR and LF).

        Holds one exec session while open; close it (`aclose()`, or leave the `async for`) to stop the
        remote command: it gets SIGTERM over the channel, and its process group is reaped by PID.
        With `ping_s`, a newline goes to the command's stdin every `ping_s` seconds: it can tell that the
        client is still there (pings stop arriving when the link is cut, long before sshd notices).

        Raises:
            SSHError: LOST when the connection drops mid-stream (re-stream after `wait_connected()`).
        """
        splitter = LineSplitter()
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        async for chunk in self.stream_bytes(command, ping_s=ping_s):
            for line in splitter.feed(decoder.decode(chunk)):
                yield line
        for line in splitter.feed(decoder.decode(b"", final=True)) + splitter.flush():
            yield line

    async def stream_bytes(self, command: str, *, ping_s: float | None = None) -> AsyncIterator[bytes]:
        """Like `stream`, but yield the raw output bytes as they arrive (for byte-exact log offsets)."""
        await self._connection()
        async with self._sessions:
            conn = await self._connection()
            generation = self._generation
            wrapped = wrap_streamed(command, self.client_id, generation)
            try:
                proc = await _open_process(conn, wrapped, stderr=asyncssh.STDOUT, encoding=None)
            except (OSError, asyncssh.Error) as exc:
                raise self._operation_error(exc, conn, command) from exc
            head = b""
            pid: int | None = None
            pinger = asyncio.create_task(_ping(proc, ping_s)) if ping_s else None
            drain = _drain_size(proc)
            try:
                while True:
                    try:
                        chunk = await proc.stdout.read(drain)
                    except (OSError, asyncssh.Error) as exc:
                        raise self._operation_error(exc, conn, command) from exc
                    if not chunk:  # end of output
                        if head:
                            yield head
                        break
                    if pid is None:
                        # The wrapper prints the PID marker line before the command's output; whatever the
                        # login shell printed before it (a ~/.bashrc banner) is dropped, so that byte
                        # offsets count the command's output only.
                        head += chunk
                        found = _find_marker(head)
                        if found is None:
                            if len(head) <= _MAX_BANNER:
                                continue
                            pid, chunk, head = -1, head, b""  # no marker: pass everything on
                        else:
                            pid, chunk, head = found[0], found[1], b""
                    for start in range(0, len(chunk), _READ_CHUNK):
                        yield chunk[start : start + _READ_CHUNK]
                await proc.wait_closed()
                if proc.exit_status is None and proc.exit_signal is None:
                    raise SSHError(SSHErrorKind.LOST, f"{self._name}: connection lost during {_short(command)!r}")
            finally:
                if pinger is not None:
                    pinger.cancel()
                running = proc.exit_status is None and proc.exit_signal is None
                if running and not conn.is_closed():
                    with contextlib.suppress(OSError, asyncssh.Error):
                        proc.terminate()
                proc.close()
                if pid is not None and pid > 0 and not conn.is_closed():
                    # Kill the group if SIGTERM over the channel did not, and remove the pidfile.
                    self._spawn(self._reap_quietly(only_pid=pid))

    async def forward(self, remote_port: int, remote_host: str = "127.0.0.1") -> int:
        """Listen on 127.0.0.1 and forward connections to `remote_host:remote_port` on the host; return the port.

        The local port outlives reconnects: the supervisor listens on the same port again over each new
        connection before it reports `Connected`, so a URL handed to other processes (the probe workers) stays
        valid. While the link is down, connections to the port are refused. Forwarding the same target again
        returns the same port.

        Raises:
            SSHError: LOST when not connected within the connect timeout; CHANNEL when the listener fails.
        """
        key = (remote_host, remote_port)
        try:
            async with asyncio.timeout(self._options.connect_timeout):
                conn = await self._connection()
        except TimeoutError:
            raise SSHError(SSHErrorKind.LOST, f"{self._name}: not connected, cannot forward {remote_port}") from None
        if key in self._listeners:
            return self._forwards[key]
        try:
            listener = await conn.forward_local_port("127.0.0.1", 0, remote_host, remote_port)
        except (OSError, asyncssh.Error) as exc:
            raise SSHError(
                SSHErrorKind.CHANNEL, f"{self._name}: cannot forward to {remote_host}:{remote_port}: {exc}"
            ) from exc
        self._listeners[key] = listener
        self._forwards[key] = listener.get_port()
        return self._forwards[key]

    async def _relisten(self, conn: asyncssh.SSHClientConnection) -> None:
        """Listen again on every forward's local port, over the new connection `conn`.

        asyncssh's forwards belong to one connection; re-listening on the same port number (rather than a
        hand-written listener that outlives connections) keeps asyncssh's own data path. If another process
        took the port during the outage, that forward is dropped (logged) and the next `forward()` picks a
        new port.
        """
        for key, port in list(self._forwards.items()):
            try:
                self._listeners[key] = await conn.forward_local_port("127.0.0.1", port, *key)
            except (OSError, asyncssh.Error) as exc:
                log.warning("%s: cannot listen on 127.0.0.1:%d again for %s:%d: %s", self._name, port, *key, exc)
                del self._forwards[key]

    async def reap_stale(self) -> list[int]:
        """Kill the tagged processes this instance streamed over earlier connections; return their PIDs.

        Only PIDs recorded by our wrapper and still carrying our tag are signalled (SIGTERM to the process
        group, SIGKILL after a grace period). The supervisor calls this after every reconnect.
        """
        return await self._reap(keep_generation=self._generation)

    async def _reap(
        self, *, keep_generation: int | None = None, only_pid: int | None = None, limited: bool = True
    ) -> list[int]:
        script = reap_script(self.client_id, keep_generation=keep_generation, only_pid=only_pid)
        result = await self._run(script, timeout=10.0, limited=limited)
        return [int(word) for word in result.stdout.split() if word.isdigit()]

    async def _reap_quietly(self, only_pid: int | None = None) -> None:
        try:
            if only_pid is None:
                pids = await self.reap_stale()
            else:
                pids = await self._reap(only_pid=only_pid)
        except SSHError as exc:
            log.warning("%s: reaping tagged processes failed: %s", self._name, exc.message)
            return
        if pids:
            log.info("%s: reaped stale remote processes %s", self._name, pids)

    async def close(self) -> None:
        """Stop tagged remote processes of this instance, close forwards and the connection."""
        if self._state is ConnectionState.CLOSED:
            return
        if self._state is ConnectionState.CONNECTED:
            # Outside the semaphore: open streams may hold every session, and closing must not wait for
            # them. If sshd refuses the extra channel, the streams' channels close below anyway.
            with contextlib.suppress(SSHError):
                await self._reap(limited=False)
        self._set_state(ConnectionState.CLOSED)
        tasks = [task for task in (self._supervisor, *self._background) if task is not None]
        for task in tasks:
            task.cancel()
        for listener in self._listeners.values():
            listener.close()
        self._listeners.clear()
        self._forwards.clear()
        link, self._link = self._link, None
        if link is not None:
            link.close()
            for conn in (link.conn, *link.jumps):
                await conn.wait_closed()
        await asyncio.gather(*tasks, return_exceptions=True)


async def _ping(proc: Any, every_s: float) -> None:
    """A newline to `proc`'s stdin every `every_s` seconds, until the channel goes (see `stream`)."""
    with contextlib.suppress(OSError, asyncssh.Error):
        while True:
            proc.stdin.write(b"\n")
            await asyncio.sleep(every_s)


OPEN_RETRIES = 4
"""Extra attempts when sshd refuses a session channel (see `_open_process`)."""


async def _open_process(conn: asyncssh.SSHClientConnection, command: str, **kwargs: Any) -> Any:
    """`create_process`, retried a few times (50, 100, 200, 400 ms apart) when the server refuses the channel.

    OpenSSH frees a closed session's slot only when its main loop next collects closed channels, so a channel
    opened right after another one closed can be refused with "no more sessions" even below MaxSessions; our
    semaphore cannot see that. Retrying is safe: a refused channel ran nothing.
    """
    for attempt in range(OPEN_RETRIES + 1):
        try:
            return await conn.create_process(command, **kwargs)
        except asyncssh.ChannelOpenError:
            if attempt == OPEN_RETRIES:
                raise
            await asyncio.sleep(0.05 * 2**attempt)
    raise AssertionError("unreachable")
