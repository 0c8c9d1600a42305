"""The access log: one line per JSON-RPC request, written off the event loop.

The request path appends a tuple of raw fields to a bounded deque (or counts
it dropped when the deque is full) and does nothing else: no LogRecord, no
formatting, no I/O. A writer thread wakes every `FLUSH_INTERVAL_S`, formats
what waits and writes it in one batch, so a slow disk or a pipe nobody reads
costs requests nothing but the lines dropped (`AccessLog.dropped`, a metric).
Times are taken from ``time.perf_counter`` on the request path and turned
into wall-clock time by the writer, against a reading of both clocks it
takes per batch.
"""

from __future__ import annotations

import hashlib
import os
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from random import random
from typing import Final

from .._json import dumps
from ._metrics import Histogram

#: How often the writer thread wakes to write what waits.
FLUSH_INTERVAL_S: Final = 0.05
#: Names, methods and principals longer than this are cut (the client chose them).
MAX_FIELD_CHARS: Final = 200
#: How many session hashes, and text fields, the writer keeps from line to line.
_KEPT: Final = 4096
#: Durations below this many microseconds are written from a table (the
#: writer's: nothing is made while the log is off).
_MICROS_KEPT: Final = 10_000
#: HTTP statuses as text, by number.
_STATUSES: Final = tuple(str(status) for status in range(1000))
_NO_PRINCIPAL: Final = ("-", '"-"')
#: The end of a timestamp, by its millisecond.
_MILLISECONDS: Final = tuple(f".{ms:03d}Z" for ms in range(1000))
#: How long closing the log waits for the writer's last batch.
CLOSE_WAIT_S: Final = 2.0

#: One request's fields, as the request path leaves them: perf_counter time,
#: client address, principal, its `Operation` (protocol version, method,
#: tool/prompt name or resource URI, JSON-RPC error code), HTTP status,
#: duration in seconds, session id.
Record = tuple[float, str, object, "Operation", int, float, "str | None"]
#: The text form of a principal that is not a str or an int (the endpoint's
#: principal_key); raises TypeError for one it has no key for.
PrincipalText = Callable[[object], str]


class AccessLog:
    """The bounded buffer and its writer thread (see the module docstring)."""

    __slots__ = (
        "lines",
        "limit",
        "dropped",
        "sample",
        "json",
        "path",
        "principal_text",
        "_stop",
        "_thread",
    )

    def __init__(
        self,
        limit: int,
        sample: float = 1.0,
        json: bool = False,
        path: str | None = None,
        principal_text: PrincipalText = str,
    ) -> None:
        self.lines: deque[Record] = deque()
        self.limit = limit
        #: Lines dropped because the buffer was full (or not sampled: no).
        self.dropped = 0
        self.sample = sample
        self.json = json
        #: Appended to; None is stderr.
        self.path = path
        self.principal_text = principal_text
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def add(self, record: Record) -> None:
        """Keep `record` for the writer, unless sampled out or the buffer is full."""
        if self.sample < 1.0 and random() >= self.sample:
            return
        lines = self.lines
        if len(lines) < self.limit:
            lines.append(record)
        else:
            self.dropped += 1

    # ---- the writer thread ---------------------------------------------------

    def open(self) -> None:
        """Start the writer thread (the file is opened in it: a FIFO's open waits)."""
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(
            target=self._write_loop, name="trio-mcp access log", daemon=True
        )
        self._thread.start()

    def close(self, wait_s: float = CLOSE_WAIT_S) -> None:
        """Write what waits and stop the thread (blocking, up to `wait_s`)."""
        thread = self._thread
        if thread is None:
            return
        self._stop.set()
        thread.join(wait_s)  # a writer stuck on a full pipe is left behind (a daemon)
        self._thread = None

    def _write_loop(self) -> None:
        try:
            if self.path is None:
                fd, own = _stderr_fd(), False
            else:
                fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
                own = True
        except OSError as exc:
            print(f"trio-mcp: cannot open the access log: {exc}", file=sys.stderr)
            return
        formatter = LineFormatter(self.principal_text)
        try:
            stop = self._stop
            while True:
                stopping = stop.wait(FLUSH_INTERVAL_S)
                self._flush(fd, formatter)
                if stopping:
                    return
        finally:
            if own:
                os.close(fd)

    def _flush(self, fd: int, formatter: LineFormatter) -> None:
        lines = self.lines
        if not lines:
            return
        offset = time.time() - time.perf_counter()
        popleft = lines.popleft
        # (what waits now: a flood is not chased for ever)
        if self.json:
            batch = [formatter.json_line(popleft(), offset) for _ in range(len(lines))]
        else:
            batch = [formatter.text_line(popleft(), offset) for _ in range(len(lines))]
        data = "".join(batch).encode("utf-8", "replace")
        try:
            while data:
                data = data[os.write(fd, data) :]
        except OSError:
            pass  # (a closed pipe or a full disk: lines are lost, requests go on)


class Operation:
    """What the lines (and the metrics) of requests alike share: one per
    method, target name, outcome and protocol version seen (`Observer`),
    with its histogram (None when metrics are off) and its fields made once
    as text and as JSON."""

    __slots__ = ("histogram", "text", "code_text", "json", "code_json")

    def __init__(
        self,
        histogram: Histogram | None,
        method: str,
        name: str | None,
        code: int | None,
        version: str,
    ) -> None:
        self.histogram = histogram
        method, name = method[:MAX_FIELD_CHARS], name[:MAX_FIELD_CHARS] if name else name
        #: "version method name" of a text line, and its code ("-" for none).
        self.text = f"{_word(version)} {_word(method)} {_word(name) if name is not None else '-'}"
        self.code_text = str(code) if code is not None else "-"
        #: The same as JSON members, and the code as a JSON value.
        fields = {"era": version, "method": method, "name": name}
        self.json = dumps(fields).decode("utf-8", "replace")[1:-1]
        self.code_json = str(code) if code is not None else "null"


class LineFormatter:
    """Turns records into lines, in the writer thread. What repeats from line
    to line is made once and kept, within bounds: the request's `Operation`
    fields, the millisecond's timestamp, a session's hash, a principal's text."""

    __slots__ = (
        "principal_text",
        "_ms",
        "_stamp",
        "_second",
        "_prefix",
        "_hashes",
        "_principals",
        "_micros",
    )

    def __init__(self, principal_text: PrincipalText = str) -> None:
        self.principal_text = principal_text
        self._ms = self._second = -1
        self._stamp = self._prefix = ""
        self._hashes: dict[str, str] = {}
        #: principal -> (its text field, its JSON value)
        self._principals: dict[object, tuple[str, str]] = {}
        self._micros = tuple(f"{us}us" for us in range(_MICROS_KEPT))

    def micros(self, seconds: float) -> str:
        """A duration as text, in whole microseconds (``"123us"``)."""
        us = int(seconds * 1e6)
        return self._micros[us] if 0 <= us < _MICROS_KEPT else f"{us}us"

    def stamp(self, wall: float) -> str:
        """ISO 8601, UTC, milliseconds (made once a millisecond)."""
        ms = int(wall * 1000)
        if ms != self._ms:
            second = ms // 1000
            if second != self._second:
                self._second = second
                self._prefix = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
            self._ms = ms
            self._stamp = self._prefix + _MILLISECONDS[ms % 1000]
        return self._stamp

    def session(self, session_id: str | None) -> str | None:
        if session_id is None:
            return None
        hashes = self._hashes
        found = dict.get(hashes, session_id)
        if found is None:
            if len(hashes) >= _KEPT:
                hashes.clear()
            found = hashes[session_id] = session_hash(session_id)
        return found

    def principal(self, principal: object) -> tuple[str, str]:
        """A principal's text field and JSON value: a str or an int as it is,
        others by `principal_text`."""
        if principal is None:
            return _NO_PRINCIPAL
        try:
            found = dict.get(self._principals, principal)
        except TypeError:  # (a principal that cannot be a key)
            found = None
        if found is None:
            if type(principal) is str:
                text = principal[:MAX_FIELD_CHARS]
            elif type(principal) is int:
                text = str(principal)
            else:
                try:
                    text = self.principal_text(principal)[:MAX_FIELD_CHARS]
                except Exception:  # (a principal with no text form: logged, not fatal)
                    text = "?"
            found = (_word(text), dumps(text).decode("utf-8", "replace"))
            if len(self._principals) >= _KEPT:
                self._principals.clear()
            try:
                self._principals[principal] = found
            except TypeError:
                pass
        return found

    def text_line(self, record: Record, offset: float) -> str:
        t, client, principal, operation, status, seconds, session = record
        sid = self.session(session) or "-"
        return (
            f"{self.stamp(t + offset)} {client or '-'} {self.principal(principal)[0]} "
            f"{operation.text} {_status(status)} {operation.code_text} "
            f"{self.micros(seconds)} {sid}\n"
        )

    def json_line(self, record: Record, offset: float) -> str:
        t, client, principal, operation, status, seconds, session = record
        sid = self.session(session)
        quoted = '"' + sid + '"' if sid is not None else "null"
        return (
            f'{{"time":"{self.stamp(t + offset)}","client":"{client or "-"}",'
            f'"principal":{self.principal(principal)[1]},{operation.json},'
            f'"status":{_status(status)},"code":{operation.code_json},'
            f'"duration_us":{int(seconds * 1e6)},"session":{quoted}}}\n'
        )


def _status(status: int) -> str:
    return _STATUSES[status] if 0 <= status < 1000 else str(status)


def session_hash(session_id: str) -> str:
    """A short, stable hash of a session id: lines of one session can be told
    together, and the id, which routes requests, is never written."""
    return hashlib.blake2b(session_id.encode("utf-8", "replace"), digest_size=6).hexdigest()


def _word(value: str) -> str:
    """`value` as one field of a text line: as it is when it is plain visible
    ASCII, else JSON-quoted (spaces, quotes, control or non-ASCII characters)."""
    if value and value.isascii() and value.isprintable() and " " not in value and '"' not in value:
        return value
    return dumps(value).decode()


def _stderr_fd() -> int:
    try:
        return sys.__stderr__.fileno() if sys.__stderr__ is not None else 2
    except (AttributeError, OSError, ValueError):
        return 2
