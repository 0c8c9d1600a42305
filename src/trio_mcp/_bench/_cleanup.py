"""After a run: DELETE the sessions a worker opened.

A load generator that leaves its sessions behind fills the server's session
table (1,024 by default) in one run, and every client after it is refused
until the sessions expire. Each worker deletes its own, one after another on
one keep-alive connection, within a time limit; a session the server has
already dropped (404) counts as gone.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Sequence

from .._errors import PeerProtocolError
from ._requests import RequestFactory
from ._response import ResponseReader

#: How long a worker may spend deleting its sessions.
CLEANUP_LIMIT_S = 5.0


def delete_sessions(
    address: tuple[int, object],
    factory: RequestFactory,
    sessions: Sequence[tuple[bytes, str]],
    limit_s: float = CLEANUP_LIMIT_S,
) -> int:
    """DELETE each (session id, protocol version) at `address`; how many are gone."""
    deadline = time.monotonic() + limit_s
    family, sockaddr = address
    gone = 0
    sock: socket.socket | None = None
    try:
        for session, version in sessions:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            if sock is None:
                sock = socket.socket(family, socket.SOCK_STREAM)
                sock.settimeout(left)
                sock.connect(sockaddr)  # type: ignore[arg-type]
            sock.settimeout(left)
            sock.sendall(factory.delete(session, version))
            reader = ResponseReader()
            closed = False
            while True:
                data = sock.recv(65536)
                if not data:
                    closed = True
                    reader.feed_eof()
                    break
                if reader.feed(data):
                    break
            if 200 <= reader.status < 300 or reader.status == 404:
                gone += 1
            if closed or reader.close:
                sock.close()
                sock = None
    except (OSError, PeerProtocolError):
        pass  # the server went away or the limit passed: the rest expire on their own
    finally:
        if sock is not None:
            sock.close()
    return gone
