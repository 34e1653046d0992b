"""The value of `--slo` (bench, compare, report) and of `[bench] slo` from the config, parsed one way."""

from __future__ import annotations

from specdash.errors import UsageError
from specdash.slo import Slo, SloError, parse_slo


def slo_from(text: str | None, where: str = "--slo") -> Slo | None:
    """The parsed SLO, None when not given; a `UsageError` naming `where` otherwise."""
    if text is None or not text.strip():
        return None
    try:
        return parse_slo(text)
    except SloError as exc:
        raise UsageError(f"{where}: {exc}") from None
