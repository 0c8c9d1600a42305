"""The control channel between a ``--workers`` supervisor and its workers.

One Unix stream socket per worker, inherited at spawn (its descriptor number
is the worker's only argument: what ``ps`` shows holds nothing secret).
Messages are JSON objects, one a line (JSON text never holds a raw newline):

- supervisor to worker: first ``hello`` (the whole configuration, secrets
  included, the worker's name and the listening sockets it inherits), then
  ``{"ping": n}`` while it runs;
- worker to supervisor: ``{"ready": port}`` once it listens, ``{"pong": n}``
  from a task of its trio run (so a blocked scheduler misses it), and
  ``{"failed": "why"}`` when it cannot start.
"""

from __future__ import annotations

import socket
from typing import Any, Final

import orjson

#: The longest line either side accepts: a configuration is a few KiB.
MAX_LINE_BYTES: Final = 1024 * 1024


class LineBuffer:
    """Bytes in, complete lines (JSON objects) out; what follows stays."""

    __slots__ = ("pending",)

    def __init__(self, pending: bytes = b"") -> None:
        self.pending = pending

    def feed(self, data: bytes) -> list[dict[str, Any]]:
        self.pending += data
        if b"\n" not in self.pending:
            if len(self.pending) > MAX_LINE_BYTES:
                raise ValueError("a control message is too long")
            return []
        *lines, self.pending = self.pending.split(b"\n")
        return [orjson.loads(line) for line in lines if line]


def encode(message: dict[str, Any]) -> bytes:
    return orjson.dumps(message) + b"\n"


def receive_first(sock: socket.socket) -> tuple[dict[str, Any], LineBuffer]:
    """The first message on `sock` (blocking, before trio runs), and the
    buffer that holds what came after it."""
    buffer = LineBuffer()
    while True:
        data = sock.recv(65536)
        if not data:
            raise EOFError("the supervisor closed the control channel")
        messages = buffer.feed(data)
        if messages:
            first, *rest = messages
            if rest:  # (the supervisor sends nothing more before "ready")
                raise ValueError("unexpected control messages before start-up")
            return first, buffer
