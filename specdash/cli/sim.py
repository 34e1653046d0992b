"""`specdash sim`: a faithful SGLang stand-in (same launch flags, log lines, endpoints and process tree).

Example: `specdash sim --model-path /models/kimi --tp 8 --speculative-algorithm EAGLE3 --sim-time-scale 0.05`.
Heavy imports (aiohttp, uvloop) happen inside `run`, so `specdash --help` stays fast.
"""

from __future__ import annotations

import argparse
import sys

NAME = "sim"
HELP = "run the SGLang simulator (accepts sglang.launch_server flags plus --sim-*)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare SGLang's flags and the simulator's own."""
    from specdash.sim.args import add_arguments as add_sim_arguments

    add_sim_arguments(parser)


def run(args: argparse.Namespace) -> int:
    """Resolve the flags as SGLang does, then run the simulated server until it is stopped."""
    from specdash.sim.args import SpecParamsError, SpecRefusedError, resolve
    from specdash.sim.faults import spec_assert_traceback, topk_range_traceback

    try:
        config, warnings = resolve(args)
    except SpecParamsError:
        # SGLang fails in ServerArgs.__post_init__ with a bare assert, before any logging is set up.
        sys.stderr.write("\n".join(spec_assert_traceback()) + "\n")
        return 1
    except SpecRefusedError:
        sys.stderr.write("\n".join(topk_range_traceback()) + "\n")
        return 1
    from specdash.sim.app import main

    return main(config, warnings)
