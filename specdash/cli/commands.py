"""Each subcommand's name, one-line help and arguments: the whole command line, without its implementations.

`build_parser` makes the parser; a subcommand's arguments are declared when that subcommand is parsed (or
for all of them with `everything=True`, for the docs and the tests), and its implementation,
`specdash.cli.NAME.run`, is imported only when it runs (`specdash.cli.main`). So `specdash --help` and
`specdash --version` import no asyncssh, httpx or Textual. Options that several commands take come from
`specdash.cli.options`, one definition each.

A declaration that needs a value from an implementation module (the engines for `replay --engine`, the demo's
time scales, the config's link-loss policies, the simulator's own flags) imports it inside its function: that
import happens only when that subcommand is parsed.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from specdash import __version__
from specdash.cli import options as o
from specdash.core.levels import DEFAULT_LEVELS, format_levels
from specdash.errors import EXIT_USAGE, did_you_mean
from specdash.limits import (
    GRACE,
    MAX_GREEDY,
    MAX_LINES,
    MAX_PROCESSES,
    MAX_REQUESTS,
    PID,
    PORT,
    SECONDS,
    int_option,
    number_option,
)
from specdash.safetext import escape_message


class Command(NamedTuple):
    """One subcommand: its name, its help line and the function that declares its arguments."""

    name: str
    help: str
    declare: Callable[[argparse.ArgumentParser], None]


class Parser(argparse.ArgumentParser):
    """argparse, but usage errors exit 2 with one line (and a "did you mean" for a misspelt choice)."""

    def error(self, message: str) -> Any:
        # The one escape of every error line.
        self.exit(EXIT_USAGE, f"{self.prog}: error: {escape_message(message)}\n(see '{self.prog} --help')\n")

    def _get_value(self, action: argparse.Action, arg_string: str) -> Any:
        # A command line is bytes: what is not UTF-8 arrives as lone surrogates, which no store, JSON or terminal
        # takes. Refused here, for every text argument at once; a local path (`type=Path`) may be any bytes.
        if action.type not in o.PATH_TYPES and not isinstance(action, argparse._SubParsersAction):
            try:
                arg_string.encode("utf-8")
            except UnicodeEncodeError as exc:
                byte = os.fsencode(arg_string[exc.start])[0]
                raise argparse.ArgumentError(
                    action, f"{ascii(arg_string)[:60]} is not UTF-8 text (byte 0x{byte:02x} at {exc.start})"
                ) from None
        return super()._get_value(action, arg_string)

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        if action.choices is not None and value not in action.choices:
            known = [str(c) for c in action.choices]
            shown = value if len(str(value)) <= 40 else f"{str(value)[:37]}..."
            raise argparse.ArgumentError(
                action, f"invalid choice: {shown!r}{did_you_mean(str(value), known)} (choose from {', '.join(known)})"
            )


class _Subcommands(argparse._SubParsersAction):  # type: ignore[type-arg]
    """The subcommand action: declares the chosen subcommand's arguments just before they are parsed."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.pending: dict[str, Callable[[argparse.ArgumentParser], None]] = {}

    def declare(self, name: str) -> None:
        """Declare the arguments of subcommand `name` (once)."""
        declare = self.pending.pop(name, None)
        if declare is not None:
            declare(self._name_parser_map[name])

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any, *rest: Any) -> None:
        self.declare(values[0])
        super().__call__(parser, namespace, values, *rest)


def build_parser(*, everything: bool = False) -> argparse.ArgumentParser:
    """The argument parser; with `everything`, every subcommand's arguments are declared now."""
    parser = Parser(
        prog="specdash",
        description="Control panel for LLM inference servers with speculative decoding (SGLang, vLLM).",
    )
    parser.add_argument("--version", action="version", version=f"specdash {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks for bug reports")
    parser.register("action", "subcommands", _Subcommands)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser, action="subcommands")
    assert isinstance(sub, _Subcommands)
    for command in COMMANDS:
        sub.add_parser(command.name, help=command.help, description=command.help)
        sub.pending[command.name] = command.declare
    if everything:
        for command in COMMANDS:
            sub.declare(command.name)
    return parser


# --- the subcommands, in the order of --help ---------------------------------------------------------------


def _connect(p: argparse.ArgumentParser) -> None:
    o.add_host_arguments(p)
    p.add_argument(
        "more_hosts", nargs="*", metavar="HOST", help="more hosts: the fleet view, one row and connection each"
    )
    p.add_argument("--mode", "-m", help="start this mode on connect if no server is running")
    o.add_screenshot_dir(p)


def _demo(p: argparse.ArgumentParser) -> None:
    from specdash.cli.demo_session import TIME_SCALE, TOUR_TIME_SCALE

    o.add_time_scale(
        p,
        f"simulated startup durations x this (default {TIME_SCALE}: a TP=8 EAGLE-3 start in about 30 s; "
        f"{TOUR_TIME_SCALE} with --autoplay: about 6 s)",
    )
    p.add_argument(
        "--autoplay",
        action="store_true",
        help="a one-minute tour for presenters: baseline, sweep, EAGLE-3, sweep, crossover (any key stops it)",
    )
    p.add_argument(
        "--resident",
        action="store_true",
        help="headless: switch between two resident modes (sleep, wake, verify) beside a restart, and print the times",
    )
    o.add_screenshot_dir(p)
    o.add_store(p, demo=False, default="the demo's own, data dir's demo.db; see 'specdash runs --demo'")


def _up(p: argparse.ArgumentParser) -> None:
    o.add_host_arguments(p)
    p.add_argument("--mode", "-m", required=True, help="a mode from the config")
    o.add_wait(p)


def _adopt(p: argparse.ArgumentParser) -> None:
    o.add_host_arguments(p)
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--port", type=PORT, help="the port the server listens on")
    which.add_argument("--pid", type=PID, help="the server's process id on the host")
    which.add_argument("--job", help="a Slurm host: the id of your own batch job running the server")
    p.add_argument("--mode", default="", help="with --job: the configured mode the job runs (its engine and port)")
    p.add_argument("--log", default="", help="its log file on the host, when its output goes to no file")
    p.add_argument("--dry-run", action="store_true", help="say what would be adopted, change nothing")
    p.add_argument("--wait", action="store_true", help="follow it until ready (exit 0) or crashed (exit 1)")


def _down(p: argparse.ArgumentParser) -> None:
    o.add_host_arguments(p)
    p.add_argument(
        "--grace", type=GRACE, help="seconds between SIGTERM and SIGKILL, 0 to 3600 (default: the mode's stop_timeout)"
    )
    p.add_argument(
        "--yes", action="store_true", help="stop an adopted server or sleeping ones without asking (it names them)"
    )


def _status(p: argparse.ArgumentParser) -> None:
    o.add_host_arguments(p)
    o.add_json(p, "machine-readable output")


def _logs(p: argparse.ArgumentParser) -> None:
    o.add_host_arguments(p)
    p.add_argument("-f", "--follow", action="store_true", help="keep printing new lines")
    p.add_argument(
        "-n",
        "--lines",
        type=int_option(0, MAX_LINES),
        default=50,
        help="how many last lines first (default 50; read from the log's last 4 MiB, LOG_TAIL_BYTES)",
    )
    p.add_argument(
        "--raw",
        action="store_true",
        help="print the log's bytes as they are (control characters and escape sequences included)",
    )


def _switch(p: argparse.ArgumentParser) -> None:
    o.add_host_arguments(p)
    p.add_argument("mode", metavar="MODE", help="a mode from the config")
    o.add_wait(p)
    p.add_argument("--restart", action="store_true", help="restart MODE even when it is live or a server of it sleeps")


def _advise(p: argparse.ArgumentParser) -> None:
    o.add_host_arguments(p, optional=True)
    p.add_argument("--mode", "-m", help="the mode whose last start on HOST is read")
    p.add_argument("--log", type=Path, help="a saved server log instead of a host's (HOST not needed)")
    p.add_argument(
        "--max-concurrency",
        type=o.CONCURRENCY,
        metavar="N",
        help="the largest concurrency the sweeps and the policy use (default: the largest default level, 100)",
    )
    p.add_argument("--engine", choices=("auto", "sglang", "vllm"), default="auto", help="default: detected")
    o.add_json(p, "machine-readable output")


def _bench(p: argparse.ArgumentParser) -> None:
    from specdash.config import LINK_LOSS_POLICIES, PROBE_PLACES

    o.add_host_arguments(p, optional=True)
    p.add_argument("--url", help="instead of HOST: a server base URL, e.g. http://127.0.0.1:30000")
    p.add_argument(
        "--mode",
        "--modes",
        dest="mode",
        default="default",
        help="mode(s) to measure; with HOST, a comma-separated list runs an A/B (e.g. baseline,eagle3)",
    )
    o.add_levels(p, default=format_levels(DEFAULT_LEVELS), help=f"{o.LEVELS_HELP} (default %(default)s)")
    o.add_max_concurrency(p)
    o.add_amount(
        p,
        duration_help="seconds per level instead of a request count",
        requests_help="requests per level (default max(5 x C, 10))",
    )
    o.add_output_len(p, default=256, help="tokens per response (default %(default)s)")
    o.add_endpoint(
        p, "what the probe requests (default: the server's engine decides: SGLang's /generate, else /v1/completions)"
    )
    o.add_prompts(p)
    p.add_argument("--model", help="model name for the OpenAI endpoints (default: from /v1/models)")
    p.add_argument("--warmup", type=int_option(0, MAX_REQUESTS), help="warmup requests per level (default C)")
    p.add_argument("--flush-cache", action="store_true", help="POST /flush_cache before each level")
    p.add_argument(
        "--processes", type=int_option(0, MAX_PROCESSES), help="probe processes (default: automatic; 0 = in-process)"
    )
    p.add_argument("--request-timeout", type=SECONDS, default=600.0, help="seconds per request")
    p.add_argument("--stall-timeout", type=SECONDS, default=60.0, help="seconds without bytes = stalled")
    p.add_argument("--level-timeout", type=SECONDS, help="hard limit per level in seconds")
    p.add_argument(
        "--on-link-loss",
        choices=LINK_LOSS_POLICIES,
        help="HOST only: when the SSH link drops, pause and re-run the level, or stop (default: config, pause)",
    )
    p.add_argument("--link-wait", type=SECONDS, help="HOST only: seconds a paused sweep waits (default 600)")
    p.add_argument(
        "--probe",
        choices=PROBE_PLACES,
        help="HOST only: run the probe on the host next to the server, or here through the tunnel "
        "(default: config, host)",
    )
    o.add_repeats(
        p,
        default=1,
        help="run the whole sweep N times (A/B in A-B-B-A order) and report median ± MAD per level (default 1)",
    )
    o.add_slo(p)
    p.add_argument(
        "--check-greedy",
        type=int_option(1, MAX_GREEDY),
        metavar="N",
        help="after the sweep, send N prompts at temperature 0 to the reference and the speculative mode and "
        "report how many outputs are identical (HOST with two modes, or --url with --greedy-reference)",
    )
    p.add_argument(
        "--greedy-reference", metavar="URL", help="with --url and --check-greedy: the reference mode's server"
    )
    o.add_store(p, demo=False)
    o.add_json(p, "print the result as JSON (live lines go to stderr)")


def _runs(p: argparse.ArgumentParser) -> None:
    p.add_argument("--host", help="only runs on this host (exact name)")
    p.add_argument("--mode", help="only runs of this mode")
    p.add_argument("--since", help="only runs created on or after this UTC date (YYYY-MM-DD)")
    p.add_argument("--status", choices=["running", "done", "failed", "interrupted"], help="only this status")
    p.add_argument(
        "-n", "--limit", type=int_option(1, MAX_LINES), default=50, help="at most this many (default %(default)s)"
    )
    o.add_json(p)
    o.add_store(p)


def _compare(p: argparse.ArgumentParser) -> None:
    o.add_run_ids(p, many=True, help="run ids (see 'specdash runs')")
    o.add_slo(p)
    o.add_tpot(p, "TPOT percentile for tok/s per user")
    o.add_force(p, "compare")
    o.add_store(p)


def _report(p: argparse.ArgumentParser) -> None:
    o.add_run_ids(p, many=True, help="run ids, reference first (see 'specdash runs')")
    p.add_argument(
        "-o", "--output", type=o.output_file, default=Path("report.html"), help="HTML file (default %(default)s)"
    )
    p.add_argument("--png", type=o.output_dir, metavar="DIR", help="also write each chart as DIR/NAME.png")
    o.add_slo(p)
    o.add_tpot(p, "TPOT percentile of the Pareto x axis")
    o.add_force(p, "report")
    o.add_store(p)


def _tune(p: argparse.ArgumentParser) -> None:
    from specdash.core.tune import DEFAULT_LEVELS as TUNE_LEVELS
    from specdash.core.tune import DEFAULT_REPEATS

    o.add_host_arguments(p)
    p.add_argument("--tune", metavar="NAME", help="take mode, baseline, space, levels, repeats from [tune.NAME]")
    p.add_argument("--mode", help="the speculative mode whose draft settings are tuned")
    p.add_argument("--baseline", help="the reference mode (default baseline)")
    p.add_argument(
        "--space",
        help="settings to try, e.g. 'steps=1,2,3,5 topk=1,4,8 draft=2,4,8,16' (SGLang) or 'k=1,2,4' (vLLM)",
    )
    o.add_levels(p, default=None, help=f"{o.LEVELS_HELP} (default {TUNE_LEVELS})")
    o.add_repeats(p, default=None, help=f"passes; later ones only for contenders (default {DEFAULT_REPEATS})")
    p.add_argument(
        "--noise-floor",
        type=number_option(0.0, 0.99),
        default=0.02,
        help="smallest relative spread, 0 to 0.99 (default 0.02)",
    )
    p.add_argument(
        "--precision",
        type=number_option(0.0, 0.99, low_open=True),
        default=0.006,
        help="passes 2..R: measure a contended level in more blocks until its relative standard error is this "
        "(default 0.006)",
    )
    p.add_argument(
        "--max-blocks",
        type=int_option(1, 1000),
        default=40,
        help="most blocks per contended level and restart (default 40)",
    )
    p.add_argument("--name", help="the tune's name (its journal; default from host, mode and space)")
    p.add_argument("--resume", action="store_true", help="go on from the journal: nothing measured twice")
    o.add_amount(
        p,
        duration_help="seconds per level (default 30; demo 2)",
        requests_help="requests per level instead of a duration",
    )
    o.add_output_len(p, default=None, help="tokens per response (default 256; demo 128)")
    o.add_prompts(p)
    o.add_endpoint(
        p, "the probe's endpoint (default: generate for SGLang, completions for vLLM, which has no /generate)"
    )
    p.add_argument("--write-mode", metavar="NAME", help="write the exported mode into the config as NAME")
    p.add_argument(
        "--engine-version",
        metavar="V",
        help="export only what this engine version accepts (e.g. 0.5.13); default: every form, each naming the "
        "version it needs",
    )
    p.add_argument("--verify", metavar="MODE", help="only verify MODE against this tune's journal")
    p.add_argument("--no-verify", action="store_true", help="skip the verification at the end of the tune")
    p.add_argument(
        "--hold",
        type=number_option(0.0, 100.0, low_open=True),
        default=3.0,
        help="the hold level runs this many levels long (in seconds or in requests, as the levels)",
    )
    o.add_time_scale(p, "demo only: simulated startup durations x this (0.01)")
    p.add_argument("--journal-dir", type=o.output_dir, help="where journals go (default: the data dir's tunes/)")
    o.add_store(p, demo=False)
    o.add_json(p, "print the result as JSON (live lines go to stderr)")


def _export(p: argparse.ArgumentParser) -> None:
    o.add_run_ids(p, many=False, help="run id")
    fmt = p.add_mutually_exclusive_group(required=True)
    fmt.add_argument("--csv", action="store_true", help="CSV, one row per level")
    fmt.add_argument("--json", action="store_true", help="JSON, one object per level")
    p.add_argument("--samples", action="store_true", help="CSV: one row per request instead")
    p.add_argument("-o", "--output", type=o.output_file, help="write to this file instead of stdout")
    o.add_store(p)


def _replay(p: argparse.ArgumentParser) -> None:
    from specdash.engines.registry import names

    p.add_argument("logfile", metavar="LOGFILE", type=Path, help="a saved SGLang or vLLM server log")
    o.add_json(p, "print the timeline as JSON")
    p.add_argument(
        "--engine",
        choices=("auto", *names(), "unknown"),
        default="auto",
        help="which engine wrote the log (default: detect it)",
    )


def _sim(p: argparse.ArgumentParser) -> None:
    from specdash.sim.args import add_arguments

    add_arguments(p)


def _config(p: argparse.ArgumentParser) -> None:
    p.add_argument("action", choices=["init", "path", "check"])
    o.add_config(p)
    p.add_argument("--force", action="store_true", help="init: overwrite an existing file")


COMMANDS: tuple[Command, ...] = (
    Command(
        "connect",
        "open the dashboard for HOST: attach to its live server, or start/switch modes from the keyboard; "
        "several hosts (or a [fleet.NAME]) open the fleet view",
        _connect,
    ),
    Command("demo", "run the dashboard offline against the built-in SGLang simulator (no GPU, no sshd needed)", _demo),
    Command(
        "up", "start a server in a mode (refused if one runs or the port is busy); --wait follows it to ready", _up
    ),
    Command(
        "adopt",
        "adopt a server started by hand (found by --port or --pid, or a Slurm --job): watch it, bench it, "
        "stop it with specdash",
        _adopt,
    ),
    Command(
        "down",
        "stop the server specdash started on HOST; reports what was killed and whether the port is free "
        "(exit 0 when nothing was running)",
        _down,
    ),
    Command(
        "status", "show the server specdash started on HOST: mode, pid, port, phase (from its log), uptime", _status
    ),
    Command(
        "logs", "print the current run's server log; -f follows it (across reconnects, no line lost or repeated)", _logs
    ),
    Command(
        "switch",
        "make another mode live: the running server stops (or sleeps, if resident) and the mode starts "
        "(or wakes, verified, if it sleeps); run history stays on the host",
        _switch,
    ),
    Command(
        "advise",
        "startup advisor: where a start's time goes and what would cut it, with evidence and predicted savings",
        _advise,
    ),
    Command("bench", "sweep concurrency levels against a server and measure tok/s, TTFT, TPOT, ITL", _bench),
    Command(
        "runs",
        "list stored bench runs (id, date, host, modes, levels, verdict); ids for compare, report, export",
        _runs,
    ),
    Command(
        "compare",
        "compare stored runs per concurrency level (the first run is the reference): speedup, crossover, Pareto",
        _compare,
    ),
    Command(
        "report", "write stored runs as one self-contained HTML report (verdict, tables, charts, provenance)", _report
    ),
    Command("tune", "search speculative settings per load with restarts, export the policy, verify it live", _tune),
    Command(
        "export",
        "export a stored bench run as CSV or JSON (sglang.bench_serving field names where they overlap)",
        _export,
    ),
    Command("replay", "replay a saved server log through the startup tracker and print the startup timeline", _replay),
    Command("sim", "run the SGLang simulator (accepts sglang.launch_server flags plus --sim-*)", _sim),
    Command("config", "write an example config (init), print its path (path), or validate it (check)", _config),
)
"""Every subcommand; `specdash.cli.NAME` holds its `run(args) -> int`."""
