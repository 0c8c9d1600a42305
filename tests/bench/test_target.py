"""Target URLs, and the rule that the target must be this machine."""

from __future__ import annotations

import pytest

from trio_mcp._bench._target import is_loopback, parse_url, resolve
from trio_mcp._errors import UsageError


def test_parse_url() -> None:
    assert parse_url("http://127.0.0.1:8000/mcp") == ("127.0.0.1", 8000, "/mcp", "127.0.0.1:8000")
    assert parse_url("http://localhost/") == ("localhost", 80, "/", "localhost")
    assert parse_url("http://[::1]:9/m?x=1") == ("::1", 9, "/m?x=1", "[::1]:9")
    assert parse_url("http://h:1")[2] == "/"


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("https://127.0.0.1/mcp", "https is not supported"),
        ("ftp://127.0.0.1/", "expected http://"),
        ("127.0.0.1:8000/mcp", "expected http://"),
        ("http:///mcp", "no host"),
        ("http://127.0.0.1:99999/", "bad URL"),
        ("http://127.0.0.1:0/", "port 0"),
        ("http://u:p@127.0.0.1/", "credentials"),
        ("http://127.0.0.1/a b", "without spaces"),
    ],
)
def test_bad_urls(url: str, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        resolve(url)


@pytest.mark.parametrize(
    ("address", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.9.8.7", True),
        ("::1", True),
        ("::ffff:127.0.0.1", True),
        ("::1%lo", True),
        ("10.0.0.1", False),
        ("192.0.2.1", False),
        ("::ffff:192.0.2.1", False),
        ("2001:db8::1", False),
        ("not an address", False),
    ],
)
def test_is_loopback(address: str, loopback: bool) -> None:
    assert is_loopback(address) is loopback


def test_loopback_targets_resolve() -> None:
    target = resolve("http://localhost:8123/mcp")
    assert target.addresses and all(is_loopback(str(sa[0])) for _, sa in target.addresses)
    assert resolve("http://127.0.0.1:8123/mcp").addresses[0][1][:2] == ("127.0.0.1", 8123)


def test_remote_targets_need_allow_remote() -> None:
    with pytest.raises(UsageError, match=r"192\.0\.2\.1.*--allow-remote"):
        resolve("http://192.0.2.1:8000/mcp")
    target = resolve("http://192.0.2.1:8000/mcp", allow_remote=True)
    assert target.addresses[0][1][0] == "192.0.2.1"


def test_unresolvable_host() -> None:
    with pytest.raises(UsageError, match="cannot resolve"):
        resolve("http://no-such-host.invalid/mcp")
