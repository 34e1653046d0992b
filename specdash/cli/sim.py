"""`specdash sim`: a faithful SGLang stand-in (same launch flags, log lines, endpoints and process tree).

Example: `specdash sim --model-path /models/kimi --tp 8 --speculative-algorithm EAGLE3 --sim-time-scale 0.05`.
Heavy imports (aiohttp, uvloop) happen inside `run`, so `specdash --help` stays fast.
"""

from __future__ import annotations

import argparse
import sys

from specdash.sim.app import main
from specdash.sim.args import SpecParamsError, SpecRefusedError, resolve
from specdash.sim.faults import spec_assert_traceback, topk_range_traceback


def run(args: argparse.Namespace) -> int:
    """Resolve the flags as SGLang does, then run the simulated server until it is stopped."""

    try:
        config, warnings = resolve(args)
    except SpecParamsError:
        # SGLang fails in ServerArgs.__post_init__ with a bare assert, before any logging is set up.
        sys.stderr.write("\n".join(spec_assert_traceback()) + "\n")
        return 1
    except SpecRefusedError:
        sys.stderr.write("\n".join(topk_range_traceback()) + "\n")
        return 1

    return main(config, warnings)
