"""A stand-in engine for the stop and crash semantics tests (standard library only, run as the test user).

It prints SGLang's ready line and answers `/health`, and on request behaves as real engines were seen to:

- `traceback-on-term`: on SIGTERM it prints a traceback ending in vLLM's `EngineDeadError` (as vLLM does
  while a SIGTERM tears its engine down), then exits 0;
- `exit-0-after`: after ready it prints uvicorn's clean shutdown lines and exits 0 by itself;
- `crash-after`: after ready it prints a traceback and exits 1;
- `leave-child`: it starts a `sleep` in its process group that outlives it (a worker left holding memory).
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Health(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args: object) -> None:
        pass


def say(*lines: str) -> None:
    for line in lines:
        print(line)
    sys.stdout.flush()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--behaviour", action="append", default=[])
    args, _ = parser.parse_known_args()
    traceback = ("Traceback (most recent call last):", '  File "/srv/engine.py", line 42, in run_engine_core')

    def on_term(*_: object) -> None:
        if "traceback-on-term" in args.behaviour:
            say(*traceback, "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue.")
        os._exit(0)

    signal.signal(signal.SIGTERM, on_term)
    if "leave-child" in args.behaviour:
        subprocess.Popen(["sleep", "300"], stdin=subprocess.DEVNULL)  # same process group, outlives us
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Health)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    say(f"[2026-01-01 00:00:00] INFO:     Uvicorn running on http://127.0.0.1:{args.port} (Press CTRL+C to quit)")
    say("[2026-01-01 00:00:01] The server is fired up and ready to roll!")
    if "exit-0-after" in args.behaviour:
        time.sleep(2.0)
        say("INFO:     Shutting down", f"INFO:     Finished server process [{os.getpid()}]")
        os._exit(0)
    if "crash-after" in args.behaviour:
        time.sleep(2.0)
        say(*traceback, "RuntimeError: worker died")
        os._exit(1)
    while True:
        time.sleep(1)


if __name__ == "__main__":
    main()
