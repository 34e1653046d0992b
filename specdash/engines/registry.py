"""Every engine specdash knows, found as modules: the only list of engines.

An engine is a module of this package that defines `RULES`, its `EngineRules` subclass (see `engines.base`);
adding an engine is adding that one module. The other modules of the package (`base`, `text`, `evidence`,
...) define no `RULES` and are skipped.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterable, Mapping
from functools import cache
from typing import Any

import specdash.engines
from specdash.engines.anyengine import AnyEngineRules
from specdash.engines.base import EngineRules
from specdash.engines.text import unwrap_tagged

UNKNOWN = AnyEngineRules.name
"""What `detect_engine` answers for lines no engine claims; `make_rules(UNKNOWN)` reads them engine-agnostically."""


@cache
def engines() -> Mapping[str, type[EngineRules]]:
    """Every engine by the name used in config files and on the command line, in name order."""
    found: dict[str, type[EngineRules]] = {}
    for info in sorted(pkgutil.iter_modules(specdash.engines.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"specdash.engines.{info.name}")
        rules = getattr(module, "RULES", None)
        if isinstance(rules, type) and issubclass(rules, EngineRules) and rules.name:
            found[rules.name] = rules
    return found


def names() -> tuple[str, ...]:
    """The engine names, in order."""
    return tuple(engines())


def get(name: str) -> type[EngineRules]:
    """The engine called `name`.

    Raises:
        KeyError: for an unknown engine name.
    """
    return engines()[name]


def make_rules(name: str) -> EngineRules:
    """A fresh rules object for one log stream of the named engine (`unknown`: engine-agnostic rules).

    Raises:
        KeyError: for an unknown engine name.
    """
    if name == UNKNOWN:
        return AnyEngineRules()
    return engines()[name]()


def identify(server_info: Mapping[str, Any] | None, models: Mapping[str, Any] | None) -> str:
    """Which engine a server is, from its `/server_info` and `/v1/models` answers; empty when none claims it."""
    for name, rules in engines().items():
        if rules.identify(server_info, models):
            return name
    return ""


def detect_engine(lines: Iterable[str], *, default: str = UNKNOWN, max_lines: int = 2000) -> str:
    """Which engine wrote these lines, by counting substrings only one engine prints (`EngineRules.votes`).

    Args:
        lines: Raw log lines (only the first `max_lines` are read).
        default: The answer when nothing votes (`unknown`: a log that names no engine claims none).
        max_lines: How far to look.

    Returns:
        An engine name, or `default`.
    """
    table = {name: (rules.votes, rules.prefix_shape) for name, rules in engines().items()}
    votes = dict.fromkeys(table, 0)
    for count, line in enumerate(lines):
        if count >= max_lines:
            break
        text, _, tagged = unwrap_tagged(line)  # a container's or a pod's name is not the server's word
        for name, (needles, shape) in table.items():
            votes[name] += sum(1 for needle in needles if needle in tagged)
            if shape is not None and text and shape.match(text):
                votes[name] += 1
    best = max(votes.values(), default=0)
    if best == 0:
        return default
    winners = [name for name, score in votes.items() if score == best]
    return default if default in winners else winners[0]


def resident_refusal(engine: str, args: tuple[str, ...], level: int) -> str | None:
    """Why a mode of `engine` with `args` cannot be resident at sleep `level` (`engines.residency.refusal`)."""
    from specdash.engines.residency import refusal

    return refusal(engine, engines()[engine].residency if engine in engines() else None, args, level)
