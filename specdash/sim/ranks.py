"""The TP-rank children: process-tree stand-ins for SGLang's `sglang::scheduler_TPn` processes.

`python -m specdash.sim.ranks CONFIG_JSON RANK` runs one rank: it takes the title
`sglang::scheduler_TP{rank}` (via setproctitle, when installed), writes `started` on its stdout pipe and
waits for `go T0` on stdin (the start barrier), prints its startup lines on the shared stderr, writes
`ready` to the parent, then waits for commands on stdin.

Deliberately *no* PR_SET_PDEATHSIG: if only the parent is SIGKILLed, the children are re-parented and stay
alive, holding their (pretend) GPU memory, which is the orphan problem specdash must handle
(engines.md 7.1). EOF on stdin therefore does not end a child. The parent ends them on every path it
controls (SIGTERM drain, crash, failed bind), as SGLang's `kill_process_tree` does.

Commands on stdin: `crash` makes rank 0 print the dynamic-speculation traceback, send SIGQUIT to the
parent (as SGLang's scheduler does when it dies) and exit.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time

from specdash.sim.args import SimConfig
from specdash.sim.faults import crash_traceback
from specdash.sim.logstyle import LogWriter
from specdash.sim.startup import hang_forever, run_rank
from specdash.sim.vllm_log import VllmLogWriter, VllmRankScript


def _set_title(rank: int, tp_size: int) -> None:
    try:
        from setproctitle import setproctitle
    except ImportError:  # optional: the tree is still realistic, only `ps` shows python
        return
    setproctitle(f"sglang::scheduler_TP{rank}" if tp_size > 1 else "sglang::scheduler")


def main(argv: list[str]) -> int:
    """Entry point of one rank process."""
    config = SimConfig.from_json(json.loads(argv[0]))
    rank = int(argv[1])
    _set_title(rank, config.tp_size)
    # Ctrl-C in a terminal reaches the whole group; the parent decides what happens, as with SGLang.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if config.faults.orphan_ranks:  # out of the launcher's process group, deaf to SIGTERM: left behind by a stop
        os.setsid()
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    # A start barrier, like the rendezvous of torch.distributed: ranks spawn (and import) at different
    # speeds, so the shared schedule starts only once every rank is up. The parent answers `go T0`.
    os.write(1, b"started\n")
    go = sys.stdin.readline().split()
    if len(go) != 2 or go[0] != "go":
        return 1  # the parent died before the barrier
    t0 = float(go[1])

    def ready() -> None:
        try:
            os.write(1, b"ready\n")
        except OSError:
            pass  # the parent is gone: stay alive as an orphan anyway

    log: LogWriter
    if config.vllm:  # vLLM's wording: the first rank prints as the EngineCore
        log = VllmLogWriter(config.tp_size, "EngineCore")
        VllmRankScript(config, rank, t0, log).run()
        ready()
    else:
        run_rank(config, rank, t0, ready)
        log = LogWriter(config.style_2026, config.tp_size)
    while True:
        try:
            line = sys.stdin.readline()
        except (OSError, ValueError):
            line = ""
        if not line:
            if config.faults.orphan_ranks:
                # Only the GPU memory is left behind: no pipe of the job (its output, slurmstepd's) is held open,
                # so the job itself ends.
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, 1)
                os.dup2(devnull, 2)
                os.closerange(3, 1024)
            hang_forever()  # parent gone (EOF): an orphan keeps running, exactly the field problem
        if line.strip() == "crash":
            body = crash_traceback(config.spec_v2)
            log.lines(body[0], body[1:], rank)
            os.kill(os.getppid(), signal.SIGQUIT)
            time.sleep(5)  # the parent's kill_process_tree normally ends us first
            return 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
