"""Secrets out of everything specdash writes: the store, exports, the host's run record and the SSH log.

The one home for redaction. A value is a secret by where it stands or by what it looks like:

- by name: a value under a secret-looking key (`api_key`, `hf_token`, `client_secret`, `DB_PASS`,
  `NGC_KEY`, ...: `is_secret_name`), the argument after (or `=`) a secret-looking flag (`--api-key`,
  `--passphrase`, `-k`), an environment word `NAME=value`, a URL query parameter (`?token=...`,
  `X-Amz-Signature=...`), a `name=value` or `"name": "value"` pair inside free text, the password of a URL;
- by shape (`SECRET_SHAPES`): the published formats of real credentials wherever they appear (Hugging Face
  `hf_...`, OpenAI and Anthropic `sk-...`, GitHub `ghp_...`, AWS key ids, JWTs, `Bearer ...`, PEM private
  keys, ...), so a token passed under a name nobody foresaw is still caught;
- inside structure: an argument that is JSON (`--speculative-config '{"api_key": ...}'`) is parsed and its
  secrets redacted key by key.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

REDACTED = "<redacted>"
"""What a secret value is written as."""

_SECRET_WORDS = ("password", "passwd", "passphrase", "secret", "apikey", "api_key", "credential", "private_key")
"""A name holding one of these anywhere is a secret's (`PGPASSWORD`, `client_secret`, `OPENAI_API_KEY`)."""
_SECRET_PARTS = frozenset({"token", "auth", "key", "pass", "pwd", "sig", "signature", "cookie", "bearer"})
"""A name with one of these as a whole `_`-separated part is a secret's (`HF_TOKEN`, `DB_PASS`, `NGC_KEY`);
as a part only, so `max_tokens`, `tokenizer`, `authors` and `keyfile` are not."""
SECRET_SHORT_FLAGS = frozenset({"-k"})
"""Short flags whose argument is a key (`-k KEY`) when a value follows (`-p` is a port too often to count)."""

SECRET_SHAPES = re.compile(
    "|".join(
        (
            r"\bhf_[A-Za-z0-9]{30,}",  # Hugging Face
            r"\bsk-(?:proj-|ant-(?:api\d\d-)?|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}",  # OpenAI, Anthropic
            r"\b[rsp]k_(?:live|test)_[A-Za-z0-9]{16,}",  # Stripe
            r"\bgh[pousr]_[A-Za-z0-9]{30,}",  # GitHub
            r"\bgithub_pat_[A-Za-z0-9_]{22,}",
            r"\bglpat-[A-Za-z0-9_\-]{20,}",  # GitLab
            r"\b(?:AKIA|ASIA|AROA|AIDA|AGPA|ANPA)[0-9A-Z]{16}\b",  # AWS access key ids
            r"\bAIza[0-9A-Za-z_\-]{35}",  # Google API keys
            r"\bxox[abprse]-[A-Za-z0-9-]{10,}",  # Slack
            r"\bnvapi-[A-Za-z0-9_\-]{20,}",  # NVIDIA NGC / build.nvidia.com
            r"\bnpm_[A-Za-z0-9]{36}",  # npm
            r"\bpypi-AgE[A-Za-z0-9_\-]{40,}",  # PyPI
            r"\bwandb_v1_[A-Za-z0-9_]{20,}",  # Weights & Biases (new format)
            r"\beyJ[A-Za-z0-9_\-]{5,}\.eyJ[A-Za-z0-9_\-]{5,}\.[A-Za-z0-9_\-]*",  # JWT
            r"-----BEGIN [A-Z ]*PRIVATE KEY-----(?:.*?-----END [A-Z ]*PRIVATE KEY-----|.*)",  # PEM
        )
    ),
    re.DOTALL,
)
"""Published shapes of real credentials: whatever name they come under, they are redacted."""

_SCHEME_VALUE = re.compile(r"(?i)\b(bearer|basic|token|digest)(\s+)([A-Za-z0-9._~+/=\-]{8,})")
"""`Authorization: Bearer abc...` (and Basic, Token): the scheme kept, the credential redacted."""
_NAMED_VALUE = re.compile(r"""([A-Za-z_][A-Za-z0-9_.\-]*)(["']?\s*[:=]\s*["']?)([^\s"'&,;}\]/][^\s"'&,;}\]]*)""")
"""`name=value`, `name: value`, `"name": "value"` in free text, a URL's query too: redacted when the name
is a secret's (`is_secret_name`). A value never starts with `/`, so `https://` is no `name: value`."""
_QUERY_VALUE = re.compile(r"([?&;])([^=&#\s?]+)=([^&#\s]*)")
"""A URL query parameter (`?token=...`, `&X-Amz-Signature=...`): redacted when its name is a secret's."""
_URL_PASSWORD = re.compile(r"(://[^/\s:@]*:)([^@\s/]+)(@)")
"""The password of `scheme://user:password@host`."""


def is_secret_name(name: str) -> bool:
    """True for `api_key`, `--api-key`, `HF_TOKEN`, `client-secret`, `DB_PASS`, `NGC_KEY`, `PGPASSWORD`, ..."""
    norm = name.lstrip("-").replace("-", "_").replace(".", "_").lower()
    if any(word in norm for word in _SECRET_WORDS):
        return True
    return any(part in _SECRET_PARTS for part in norm.split("_"))


def redact_text(text: str) -> str:
    """Free text (a command line, a log message, a URL, an error) with every secret in it redacted: by shape
    (`SECRET_SHAPES`), after an auth scheme, as the value of a secret-looking name, as a URL's password."""
    out = SECRET_SHAPES.sub(REDACTED, text)
    if "://" in out and "@" in out:
        out = _URL_PASSWORD.sub(rf"\1{REDACTED}\3", out)
    out = _SCHEME_VALUE.sub(lambda m: m.group(1) + m.group(2) + REDACTED, out)
    if "?" in out and "=" in out:
        out = _QUERY_VALUE.sub(
            lambda m: (
                m.group(1) + m.group(2) + "=" + REDACTED if m.group(3) and is_secret_name(m.group(2)) else m.group(0)
            ),
            out,
        )
    if "=" in out or ":" in out:
        out = _NAMED_VALUE.sub(_named, out)
    return out


def _named(m: re.Match[str]) -> str:
    name, sep, value = m.group(1), m.group(2), m.group(3)
    if value.startswith("<redacted") or (value.isdigit() and len(value) < 12) or not is_secret_name(name):
        # a count (`eos_token_id=2`, `max_token=5`) is no secret
        return m.group(0)
    return name + sep + REDACTED


def redact(value: Any) -> Any:
    """`value` (parsed JSON, a config, an argv) with every secret in it redacted, recursively: strings under a
    secret-looking key; in a list, the argument of a secret-looking flag; any string by `redact_string`
    (shapes, and JSON inside a string). SGLang's `/server_info` echoes `api_key`."""
    if isinstance(value, Mapping):
        return {
            k: REDACTED if isinstance(v, str) and v and is_secret_name(str(k)) else redact(v) for k, v in value.items()
        }
    if isinstance(value, list | tuple):  # an argv: the value after `--api-key` (or `--api-key=VALUE`)
        return [redact(item) if not isinstance(item, str) else item for item in redact_argv(value)]
    if isinstance(value, str):
        return redact_string(value)
    return value


def redact_string(text: str) -> str:
    """One string value: a JSON object or array in it is redacted key by key (and written back as JSON);
    anything else by `redact_text`."""
    stripped = text.strip()
    if stripped[:1] in ("{", "[") and stripped[-1:] in ("}", "]"):
        try:
            parsed = json.loads(stripped)
        except (ValueError, RecursionError):
            parsed = None
        if isinstance(parsed, dict | list) and (clean := redact(parsed)) != parsed:
            return redact_text(json.dumps(clean, ensure_ascii=False))
    return redact_text(text)


def redact_argv(argv: list[Any] | tuple[Any, ...]) -> list[Any]:
    """An argv with the values of secret flags, secret `NAME=value` environment words, JSON arguments and
    secret-shaped words redacted."""
    out: list[Any] = []
    for item in argv:
        prev = out[-1] if out and isinstance(out[-1], str) else ""
        if not isinstance(item, str):
            out.append(item)
        elif _takes_secret(prev) and not item.startswith("--"):
            out.append(REDACTED)
        elif "=" in item and re.match(r"-{0,2}[A-Za-z_][A-Za-z0-9_.\-]*=", item):
            name, _, value = item.partition("=")
            out.append(f"{name}={REDACTED}" if value and is_secret_name(name) else f"{name}={redact_string(value)}")
        else:
            out.append(redact_string(item))
    return out


def _takes_secret(flag: str) -> bool:
    """A flag whose next word is its secret value: `--api-key`, `--passphrase`, `-k`."""
    if flag in SECRET_SHORT_FLAGS:
        return True
    return flag.startswith("--") and "=" not in flag and is_secret_name(flag)


def redact_url(url: str) -> str:
    """`http://user:pass@host:1/?token=x` -> `http://user:<redacted>@host:1/?token=<redacted>`."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return redact_text(url)
    if parts.password is not None:
        host = parts.netloc.rpartition("@")[2]
        url = urlunsplit(parts._replace(netloc=f"{parts.username}:{REDACTED}@{host}"))
    return redact_text(url)


def redact_command(command: str) -> str:
    """A shell command line (as asyncssh logs it) with its secrets redacted, word by word.

    Falls back to `redact_text` (names and shapes in free text) when the line does not split as shell words.
    """
    try:
        words = shlex.split(command)
    except ValueError:
        return _redact_loose_flags(redact_text(command))
    redacted = redact_argv(words)
    return command if redacted == words else shlex.join(redacted)


def _redact_loose_flags(text: str) -> str:
    """`--api-key VALUE` / `-k VALUE` pairs in a line that is no valid shell (an unbalanced quote)."""
    return re.sub(
        r"((?:^|\s)(?:--[\w.-]+|-k)\s+)([^\s-]\S*)",
        lambda m: m.group(1) + REDACTED if _takes_secret(m.group(1).strip()) else m.group(0),
        text,
    )
