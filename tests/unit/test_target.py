"""Host-string parsing: what OpenSSH users type, and clear refusals naming the input."""

from __future__ import annotations

import pytest

from specdash.errors import EXIT_USAGE, UsageError
from specdash.target import Target, parse_target


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("gpu1", Target("gpu1")),
        ("root@h:2222", Target("h", "root", 2222)),
        ("alice@gpu-box.example.com", Target("gpu-box.example.com", "alice")),
        ("10.0.0.5:22", Target("10.0.0.5", None, 22)),
        ("ssh://bob@h:2200", Target("h", "bob", 2200)),
        ("[::1]:2222", Target("::1", None, 2222)),
        ("u@[fe80::1%eth0]", Target("fe80::1%eth0", "u")),
        ("::1", Target("::1")),
        ("  my_alias  ", Target("my_alias")),
        ("a@b@host", Target("host", "a@b")),
    ],
)
def test_parse_target_accepts(text: str, expected: Target) -> None:
    assert parse_target(text) == expected


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("", "empty"),
        ("h:0", "port '0'"),
        ("h:65536", "port '65536'"),
        ("h:ssh", "port 'ssh'"),
        ("h:", "port ''"),
        ("root@", "host name ''"),
        ("@h", "user ''"),
        ("-oProxyCommand=x", "starts with '-'"),
        ("host name", "host name 'host name'"),
        ("[::1", "missing ']'"),
        ("[::1]x", "unexpected 'x'"),
    ],
)
def test_parse_target_refuses_naming_the_input(text: str, needle: str) -> None:
    with pytest.raises(UsageError) as caught:
        parse_target(text)
    assert repr(text) in caught.value.message
    assert needle in caught.value.message
    assert caught.value.exit_code == EXIT_USAGE


@pytest.mark.parametrize("text", ["root@h:2222", "h", "u@[::1]:22", "h:22"])
def test_str_round_trips(text: str) -> None:
    assert parse_target(str(parse_target(text))) == parse_target(text)
