"""The `--slo` flag shared by `bench`, `compare` and `report`, and `[bench] slo` from the config."""

from __future__ import annotations

import argparse

from specdash.errors import UsageError
from specdash.slo import Slo, SloError, parse_slo

SLO_HELP = "judge levels against an SLO, e.g. ttft_p90=500ms,tpot_p90=50ms (attainment, goodput, largest C)"


def add_slo_argument(parser: argparse.ArgumentParser) -> None:
    """Declare `--slo`."""
    parser.add_argument("--slo", help=SLO_HELP)


def slo_from(text: str | None, where: str = "--slo") -> Slo | None:
    """The parsed SLO, None when not given; a `UsageError` naming `where` otherwise."""
    if text is None or not text.strip():
        return None
    try:
        return parse_slo(text)
    except SloError as exc:
        raise UsageError(f"{where}: {exc}") from None
