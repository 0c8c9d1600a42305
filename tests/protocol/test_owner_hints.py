"""Owner hints in session ids: minted, verified with every key of the ring,
refused when tampered with; and plain ids when no owner name is set."""

from __future__ import annotations

import re
import string

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trio_mcp import MCPConfig
from trio_mcp._http._connection import Request
from trio_mcp._protocol._owners import OWNER_PATTERN, OwnerHints, PassingOn
from trio_mcp._protocol._sessions import SessionIds

OLD, NEW = b"old key", b"new key"
#: The whole id, as the README writes it down.
ID_FORMAT = re.compile(r"^([A-Za-z0-9-]{1,16})\.[0-9a-f]{32}\.[A-Za-z0-9_-]{12}$")


def test_an_id_names_its_owner_and_verifies() -> None:
    hints = OwnerHints("w0", [NEW])
    session_id = hints()
    assert ID_FORMAT.fullmatch(session_id)
    assert re.match(OWNER_PATTERN, session_id).group(1) == "w0"
    assert hints.owner(session_id) == "w0"
    assert OwnerHints("w1", [NEW]).owner(session_id) == "w0"  # any process of the group
    assert hints() != session_id


def test_the_longest_id_is_short_visible_ascii() -> None:
    session_id = OwnerHints("a" * 16, [NEW])()
    assert len(session_id) <= 64
    assert all(33 <= ord(c) <= 126 for c in session_id)


def test_every_single_character_tamper_is_refused() -> None:
    hints = OwnerHints("w-7", [NEW])
    session_id = hints()
    alphabet = string.ascii_letters + string.digits + "-_.~"
    for index, original in enumerate(session_id):
        for replacement in alphabet:
            if replacement != original:
                forged = session_id[:index] + replacement + session_id[index + 1 :]
                assert hints.owner(forged) is None, forged
    for cut in range(len(session_id)):
        assert hints.owner(session_id[:cut]) is None
    assert hints.owner(session_id + "A") is None


def test_another_key_ring_does_not_verify() -> None:
    session_id = OwnerHints("w0", [NEW])()
    assert OwnerHints("w1", [b"another"]).owner(session_id) is None


def test_a_rotated_ring_verifies_old_ids_and_signs_with_the_new_key() -> None:
    before = OwnerHints("w0", [OLD])
    old_id = before()
    after = OwnerHints("w0", [NEW, OLD])
    new_id = after()
    assert after.owner(old_id) == "w0"
    assert after.owner(new_id) == "w0"
    assert OwnerHints("w0", [NEW]).owner(new_id) == "w0"  # signed with the first key
    assert before.owner(new_id) is None


def test_a_plain_id_has_no_owner() -> None:
    assert OwnerHints("w0", [NEW]).owner(SessionIds()()) is None


def test_without_an_owner_name_ids_are_plain() -> None:
    from trio_mcp import Server
    from trio_mcp._mcp._endpoint import MCPEndpoint
    from trio_mcp._protocol._sessions import new_session_id

    endpoint = MCPEndpoint(Server("plain"), MCPConfig())
    assert endpoint.passing is None
    assert endpoint.stores.sessions.table._new_id is new_session_id


@pytest.mark.parametrize(
    "name", ["", "a" * 17, "w_0", "w.0", "wö", "w 0", "w/0"], ids=lambda n: repr(n)
)
def test_owner_names_are_checked(name: str) -> None:
    with pytest.raises(ValueError, match="owner_name"):
        MCPConfig(owner_name=name, peer_sockets_dir="/tmp/x" if not name else "")
    with pytest.raises(ValueError):
        OwnerHints(name, [NEW])


def test_peer_sockets_need_an_owner_name() -> None:
    with pytest.raises(ValueError, match="peer_sockets_dir needs an owner_name"):
        MCPConfig(peer_sockets_dir="/tmp/x")
    assert MCPConfig(owner_name="w0-A", peer_sockets_dir="/tmp/x").owner_name == "w0-A"


@given(st.text(max_size=80))
def test_no_malformed_id_has_an_owner(text: str) -> None:
    """Arbitrary text never verifies (it would need the MAC), and never raises."""
    hints = OwnerHints("w0", [NEW])
    assert hints.owner(text) is None


@given(st.text(alphabet=st.characters(min_codepoint=33, max_codepoint=126), max_size=80))
def test_no_malformed_id_is_passed_on(text: str) -> None:
    passing = PassingOn(OwnerHints("w0", [NEW]), "/messages")
    request = Request("POST", "/mcp", 1, [], {b"mcp-session-id": text.encode()}, b"")
    assert passing.owner_to_ask(request, True) is None


def _request(session_id: str | None, target: str = "/mcp", method: str = "POST") -> Request:
    singles = {} if session_id is None else {b"mcp-session-id": session_id.encode()}
    return Request(method, target, 1, [], singles, b"")


def test_passing_on_asks_the_owner_of_another_process_only() -> None:
    ring = [NEW]
    mine, theirs = OwnerHints("w0", ring), OwnerHints("w1", ring)
    passing = PassingOn(mine, "/messages")
    other = theirs()
    assert passing.owner_to_ask(_request(other), True) == "w1"
    assert passing.owner_to_ask(_request(other, method="GET"), True) == "w1"
    assert passing.owner_to_ask(_request(mine()), True) is None
    assert passing.owner_to_ask(_request(None), True) is None
    assert passing.owner_to_ask(_request(SessionIds()()), True) is None
    forged = other[:-1] + ("A" if other[-1] != "A" else "B")
    assert passing.owner_to_ask(_request(forged), True) is None
    # the 2024-11-05 messages URL: its query names the session
    post = _request(None, f"/messages?session_id={other}")
    assert passing.owner_to_ask(post, False) == "w1"
    assert passing.owner_to_ask(_request(None, f"/messages?session_id={mine()}"), False) is None
    assert passing.owner_to_ask(_request(None, "/messages"), False) is None
    assert passing.owner_to_ask(_request(None, "/sse", "GET"), False) is None


_VISIBLE = st.text(alphabet=st.characters(min_codepoint=33, max_codepoint=126), max_size=80)


@given(
    st.one_of(
        _VISIBLE,
        st.builds(lambda rest: "w1." + rest, _VISIBLE),
        st.builds(lambda rest: "w0." + rest, _VISIBLE),
        st.builds(lambda i, c: _TAMPERED[i % len(_TAMPERED)](c), st.integers(0, 1000), _VISIBLE),
    )
)
def test_an_endpoint_answers_any_malformed_id_with_404(session_id: str) -> None:
    """Through the whole endpoint (no socket): an id that is not a live
    session, hinted or not, forged or not, is answered 404, never passed on."""
    status = _route_status(session_id)
    assert status == 404, (session_id, status)


def _tamper(index: int):
    def tampered(extra: str) -> str:
        genuine = _THEIRS()
        char = extra[:1] or "x"
        if genuine[index % len(genuine)] == char:
            char = "A" if char != "A" else "B"
        position = index % len(genuine)
        return genuine[:position] + char + genuine[position + 1 :]

    return tampered


_THEIRS = OwnerHints("w1", [NEW])
_TAMPERED = [_tamper(i) for i in range(62)]
_ENDPOINT: list = []


def _route_status(session_id: str) -> int:
    from trio_mcp import Server
    from trio_mcp._http._connection import Response
    from trio_mcp._mcp._endpoint import MCPEndpoint

    if not _ENDPOINT:
        config = MCPConfig(
            owner_name="w0", peer_sockets_dir="/nonexistent", request_state_keys=("new key",)
        )
        _ENDPOINT.append(MCPEndpoint(Server("x"), config))
    body = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}'
    singles = {
        b"host": b"127.0.0.1",
        b"content-type": b"application/json",
        b"accept": b"application/json, text/event-stream",
        b"mcp-session-id": session_id.encode(),
        b"mcp-protocol-version": b"2025-11-25",
    }
    request = Request("POST", "/mcp", 1, list(singles.items()), singles, body, "127.0.0.1")
    response = _ENDPOINT[0].router(request)
    assert type(response) is Response, response  # (never passed on: nothing to await)
    return response.status
