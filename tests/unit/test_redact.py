"""`specdash.redact`: secrets by name and by shape, in one place (issue 29 point 3).

A table of real-world secret shapes (each one fake, with the published format), each tried in every place a
secret reaches what specdash writes: a flag's argument, `--flag=VALUE`, an environment word, a JSON-valued
argument, a URL query, free text (a log message), a nested config. And a table of look-alikes that must
stay as they are (counts, paths, model names), so redaction does not eat what a user needs to read.
"""

from __future__ import annotations

import json

import pytest

from specdash.redact import REDACTED, is_secret_name, redact, redact_argv, redact_command, redact_text

SHAPES = {
    "huggingface": "hf_AbCdEfGhIjKlMnOpQrStUvWxYz01234567",
    "openai": "sk-proj-Abc123Def456Ghi789Jkl012Mno345",
    "openai-legacy": "sk-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789abcd",
    "anthropic": "sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz0123-_x",
    "github-classic": "ghp_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789",
    "github-oauth": "gho_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789",
    "github-fine-grained": "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
    "gitlab": "glpat-AbCdEfGhIjKlMnOpQrSt",
    "aws-access-key-id": "AKIAIOSFODNN7EXAMPLE",
    "aws-session-key-id": "ASIAY34FZKBOKMUTVV7A",
    "google": "AIzaSyA-abcdefghijklmnopqrstuvwxyz12345",
    "slack": "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
    "stripe": "sk_live_51AbCdEfGhIjKlMnOpQrSt",
    "nvidia": "nvapi-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789",
    "npm": "npm_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789",
    "jwt": "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0."
    "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c",
}
"""Published formats of real credentials (all fake): caught by shape, whatever name they come under."""

NAMED = {
    "api-key-flag": (["--api-key", "opaque-1"], "opaque-1"),
    "api-key-equals": (["--api-key=opaque-2"], "opaque-2"),
    "passphrase": (["--passphrase", "correct horse battery"], "correct horse battery"),
    "short-k": (["-k", "opaque-3"], "opaque-3"),
    "db-pass-env": (["DB_PASS=opaque-4"], "opaque-4"),
    "ngc-key-env": (["NGC_KEY=opaque-5"], "opaque-5"),
    "pgpassword-env": (["PGPASSWORD=opaque-6"], "opaque-6"),
    "hub-token-env": (["HUGGING_FACE_HUB_TOKEN=opaque-7"], "opaque-7"),
    "aws-secret-env": (["AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"], "wJalrXUtnFEMI"),
    "json-arg": (["--speculative-config", '{"method": "EAGLE", "api_key": "opaque-8"}'], "opaque-8"),
    "json-arg-nested": (
        ["--hf-overrides", '{"auth": {"token": "opaque-9"}, "x": [{"password": "opaque-10"}]}'],
        "opaque-",
    ),
    "json-equals": (['--speculative-config={"api_key": "opaque-11"}'], "opaque-11"),
    "url-query": (["--url", "http://127.0.0.1:1/v1?token=opaque-12&x=1"], "opaque-12"),
    "url-query-signature": (["https://b.s3.amazonaws.com/m?X-Amz-Signature=opaque-13&a=b"], "opaque-13"),
    "url-password": (["--proxy", "http://user:opaque-14@proxy:3128"], "opaque-14"),
    "bearer-header": (["-H", "Authorization: Bearer opaque-15-long"], "opaque-15-long"),
}
"""Secrets found by where they stand (argv shapes): (argv, the secret that must not survive)."""

KEPT = [
    "--max-new-tokens",
    "512",
    "--speculative-num-draft-tokens",
    "16",
    "--tokenizer",
    "/models/tok",
    "--ssl-keyfile-path-note",
    "--model-path",
    "/models/Llama-3.1-8B-Instruct",
    "--served-model-name",
    "sk-model",
    "--disable-auth",
    "--port",
    "30000",
    '{"max_tokens": 64, "eos_token_id": 2}',
    "20260322-120000-abc123",
]
"""Words that look near a secret but are none: they stay as they are."""


@pytest.mark.parametrize("shape", list(SHAPES))
def test_secret_shapes_are_redacted_wherever_they_stand(shape: str) -> None:
    secret = SHAPES[shape]
    argvs = [
        ["--innocent-name", secret],
        [f"--innocent-name={secret}"],
        [f"SOME_VAR={secret}"],
        ["--extra-config", json.dumps({"innocent": secret})],
        ["--url", f"http://127.0.0.1:1/x?innocent={secret}"],
        [f"text with {secret} inside"],
    ]
    for argv in argvs:
        out = redact_argv(argv)
        assert secret not in json.dumps(out), (argv, out)
        assert REDACTED in json.dumps(out), out
        assert secret not in redact_command(" ".join(argv)), argv
    assert secret not in redact_text(f"2026-03-22 ERROR login failed with {secret}: denied")
    assert secret not in json.dumps(redact({"a": {"b": [secret]}}))


@pytest.mark.parametrize("case", list(NAMED))
def test_named_secrets_are_redacted(case: str) -> None:
    argv, secret = NAMED[case]
    out = redact_argv(argv)
    assert secret not in json.dumps(out), out
    line = " ".join(a if " " not in a and "{" not in a else f"'{a}'" for a in argv)
    assert secret not in redact_command(line), redact_command(line)
    assert secret not in redact_command(line + " 'unbalanced"), "the fallback for a line that does not split"


def test_json_argument_stays_json_with_its_other_keys() -> None:
    out = redact_argv(["--speculative-config", '{"method": "EAGLE", "api_key": "x", "num_steps": 3}'])
    assert json.loads(out[1]) == {"method": "EAGLE", "api_key": REDACTED, "num_steps": 3}


def test_look_alikes_are_kept() -> None:
    assert redact_argv(KEPT) == KEPT
    assert redact_text("max_tokens=5 eos_token_id=2 tokenizer=/m Note: see https://docs.example/x") == (
        "max_tokens=5 eos_token_id=2 tokenizer=/m Note: see https://docs.example/x"
    )


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("api_key", True),
        ("--api-key", True),
        ("HF_TOKEN", True),
        ("DB_PASS", True),
        ("NGC_KEY", True),
        ("PGPASSWORD", True),
        ("client-secret", True),
        ("--passphrase", True),
        ("X-Amz-Signature", True),
        ("max_tokens", False),
        ("tokenizer", False),
        ("authors", False),
        ("ssl_keyfile", False),
        ("passthrough", False),
        ("speculative_num_draft_tokens", False),
    ],
)
def test_secret_names(name: str, secret: bool) -> None:
    assert is_secret_name(name) is secret
