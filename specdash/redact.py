"""Secrets out of everything specdash writes locally: the store, exports and the SSH log.

One set of rules: a value under a secret-looking key (`api_key`, `hf_token`, `password`, `client_secret`,
...), the argument after (or `=`) a secret-looking flag (`--api-key`), an environment assignment with a
secret-looking name (`HF_TOKEN=...`), and the password of a URL (`http://user:pass@host`).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

SECRET_KEY = re.compile(r"(^|_)(api_?key|password|passwd|secret|token|auth|credentials?)($|_)", re.IGNORECASE)
"""A key, flag (dashes read as underscores) or variable name whose value is a secret."""
REDACTED = "<redacted>"
"""What a secret value is written as."""


def is_secret_name(name: str) -> bool:
    """True for `api_key`, `--api-key`, `HF_TOKEN`, `client-secret`, ..."""
    return bool(SECRET_KEY.search(name.lstrip("-").replace("-", "_")))


def redact(value: Any) -> Any:
    """`value` with every string stored under a secret-looking key replaced by `REDACTED`, recursively
    (SGLang's `/server_info` echoes `api_key`); in a list, the argument of a secret-looking flag."""
    if isinstance(value, Mapping):
        return {
            k: REDACTED if isinstance(v, str) and v and is_secret_name(str(k)) else redact(v) for k, v in value.items()
        }
    if isinstance(value, list | tuple):  # an argv: the value after `--api-key` (or `--api-key=VALUE`)
        return [redact(item) if not isinstance(item, str) else item for item in redact_argv(value)]
    if isinstance(value, str) and "://" in value and "@" in value:
        return redact_url(value)
    return value


def redact_argv(argv: list[Any] | tuple[Any, ...]) -> list[Any]:
    """An argv with the values of secret flags and secret `NAME=value` environment words redacted."""
    out: list[Any] = []
    for item in argv:
        prev = out[-1] if out and isinstance(out[-1], str) else ""
        if not isinstance(item, str):
            out.append(item)
        elif prev.startswith("--") and "=" not in prev and is_secret_name(prev):
            out.append(REDACTED)
        elif "=" in item and not item.startswith("-") and re.match(r"[A-Za-z_][A-Za-z0-9_]*=", item):
            name, _, secret = item.partition("=")
            out.append(f"{name}={REDACTED}" if secret and is_secret_name(name) else item)
        elif item.startswith("--") and "=" in item:
            name, _, secret = item.partition("=")
            out.append(f"{name}={REDACTED}" if secret and is_secret_name(name) else item)
        else:
            out.append(redact_url(item) if "://" in item and "@" in item else item)
    return out


def redact_url(url: str) -> str:
    """`http://user:pass@host:1/` -> `http://user:<redacted>@host:1/`; other URLs unchanged."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    if parts.password is None:
        return url
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{parts.username}:{REDACTED}@{host}"))


def redact_command(command: str) -> str:
    """A shell command line (as asyncssh logs it) with its secrets redacted, word by word.

    Falls back to redacting every `--secret VALUE`-like pair by pattern when the line does not split.
    """
    try:
        words = shlex.split(command)
    except ValueError:
        return re.sub(
            r"((?:--)?[\w-]*(?:api[_-]?key|password|passwd|secret|token|auth|credentials?)[\w-]*[= ])\S+",
            rf"\1{REDACTED}",
            command,
            flags=re.IGNORECASE,
        )
    redacted = redact_argv(words)
    return command if redacted == words else shlex.join(redacted)
