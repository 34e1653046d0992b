"""SGLang's log line formats, in the two wordings the simulator speaks (`--sim-log-style`).

`sglang-0.5` is v0.5.6 (the main reference, engines.md 5.2/5.4); `sglang-2026` is HEAD (engines.md 5.3):
`elapsed=` fields, `CUDA graph` capture lines naming the graph, the shard bar redrawn with `\\r`, and batch
lines without the trailing `, `. Every write is one `os.write` of whole lines, so the TP children (which
share the parent's stderr) never tear each other's lines, and nothing is left in a Python buffer when a
process is SIGKILLed. SGLang logs and tqdm go to stderr; uvicorn's access log goes to stdout.
"""

from __future__ import annotations

import os
import time
from http import HTTPStatus

TQDM_BLOCKS = " ▏▎▍▌▋▊▉█"


class LogWriter:
    """Writes timestamped SGLang lines: `[YYYY-mm-dd HH:MM:SS TPn] message`."""

    batch_lines = True
    """The scheduler prints SGLang's `Prefill batch` / `Decode batch` lines (vLLM's wording has none)."""

    def __init__(self, style_2026: bool, tp_size: int, err_fd: int = 2, out_fd: int = 1) -> None:
        self.style_2026 = style_2026
        self._tp = tp_size
        self._err = err_fd
        self._out = out_fd

    def prefix(self, rank: int | None = None) -> str:
        """`[ts]` or `[ts TPn]`; a TP=1 scheduler has no tag, exactly like SGLang."""
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        tag = f" TP{rank}" if rank is not None and self._tp > 1 else ""
        return f"[{stamp}{tag}]"

    def _write(self, fd: int, text: str) -> None:
        try:
            os.write(fd, text.encode())
        except OSError:
            pass  # the reader went away (EPIPE); a server keeps running without its log, as SGLang does

    def raw(self, text: str) -> None:
        """Write text as-is to stderr (progress bars, traceback bodies)."""
        self._write(self._err, text)

    def log(self, message: str, rank: int | None = None) -> None:
        """One SGLang line (no level name, as SGLang's own lines have none)."""
        self._write(self._err, f"{self.prefix(rank)} {message}\n")

    def lines(self, first: str, rest: list[str], rank: int | None = None) -> None:
        """A prefixed first line and unprefixed continuation lines (tracebacks), in one write."""
        body = "".join(f"{line}\n" for line in rest)
        self._write(self._err, f"{self.prefix(rank)} {first}\n{body}")

    def uvicorn(self, level: str, message: str) -> None:
        """A uvicorn line reformatted by SGLang: `[ts] INFO:     message`."""
        self._write(self._err, f"{self.prefix()} {(level + ':').ljust(10)}{message}\n")

    def access(self, peer: str, method: str, path: str, status: int) -> None:
        """A uvicorn access line, on stdout as in SGLang."""
        phrase = HTTPStatus(status).phrase
        self._write(self._out, f'{self.prefix()} INFO:     {peer} - "{method} {path} HTTP/1.1" {status} {phrase}\n')

    def prefill_line(
        self, new_seq: int, new_token: int, usage: float, running: int, queue: int, input_tput: float
    ) -> str:
        """`Prefill batch, ...` in the chosen wording (the caller adds the TP0 prefix)."""
        head = (
            f"Prefill batch, #new-seq: {new_seq}, #new-token: {new_token}, #cached-token: 0, "
            f"token usage: {usage:.2f}, #running-req: {running}, #queue-req: {queue}, "
        )
        if self.style_2026:
            return head + f"#pending-token: 0, cuda graph: False, input throughput (token/s): {input_tput:.2f}"
        return head

    def decode_line(
        self,
        running: int,
        tokens: int,
        usage: float,
        accept: tuple[float, float] | None,
        cuda_graph: bool,
        gen_tput: float,
        queue: int,
    ) -> str:
        """`Decode batch, ...`; `accept` is `(accept len, accept rate)` when speculating."""
        spec = f"accept len: {accept[0]:.2f}, accept rate: {accept[1]:.2f}, " if accept else ""
        line = (
            f"Decode batch, #running-req: {running}, #token: {tokens}, token usage: {usage:.2f}, {spec}"
            f"cuda graph: {cuda_graph}, gen throughput (token/s): {gen_tput:.2f}, #queue-req: {queue}"
        )
        return line if self.style_2026 else line + ", "


def tqdm_time(seconds: float) -> str:
    """tqdm's `mm:ss` (or `h:mm:ss`)."""
    s = int(seconds)
    m, s = divmod(s, 60)
    h, m = divmod(m, 60)
    return f"{h:d}:{m:02d}:{s:02d}" if h else f"{m:02d}:{s:02d}"


def tqdm_tail(n: int, total: int, elapsed: float) -> str:
    """`[elapsed<remaining, rate]` as tqdm prints it."""
    if n == 0 or elapsed <= 0:
        return f"[{tqdm_time(elapsed)}<?, ?it/s]"
    rate = n / elapsed
    remaining = (total - n) / rate
    rate_s = f"{rate:5.2f}it/s" if rate >= 1 else f"{1 / rate:5.2f}s/it"
    return f"[{tqdm_time(elapsed)}<{tqdm_time(remaining)}, {rate_s}]"


def shard_bar(n: int, total: int, elapsed: float) -> str:
    """SGLang's shard bar text: `Loading safetensors checkpoint shards:  NN% Completed | n/N [...]`."""
    pct = 100.0 * n / total if total else 100.0
    return f"Loading safetensors checkpoint shards: {pct:3.0f}% Completed | {n}/{total} {tqdm_tail(n, total, elapsed)}"


def capture_bar(bs: int, avail_gb: float, n: int, total: int, elapsed: float) -> str:
    """tqdm's default bar for graph capture: `Capturing batches (bs=N avail_mem=X GB):  PP%|...| i/M [..]`."""
    frac = n / total if total else 1.0
    filled = frac * 10
    full = int(filled)
    bar = "█" * full
    if full < 10:
        bar += TQDM_BLOCKS[int((filled - full) * 8)] + " " * (9 - full)
    desc = f"Capturing batches (bs={bs} avail_mem={avail_gb:.2f} GB)"
    return f"{desc}: {frac * 100:3.0f}%|{bar}| {n}/{total} {tqdm_tail(n, total, elapsed)}"
