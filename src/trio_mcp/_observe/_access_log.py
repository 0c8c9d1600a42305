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

#: How often the writer thread wakes to write what waits.
FLUSH_INTERVAL_S: Final = 0.05
#: Names, methods and principals longer than this are cut (the client chose them).
MAX_FIELD_CHARS: Final = 200
#: How many session hashes, and text fields, the writer keeps from line to line.
_KEPT: Final = 4096
#: Durations below this many microseconds are written from a table.
_MICROS_KEPT: Final = 10_000
_MICROS: Final = tuple(f"{us}us" for us in range(_MICROS_KEPT))
#: The end of a timestamp, by its millisecond.
_MILLISECONDS: Final = tuple(f".{ms:03d}Z" for ms in range(1000))
#: How long closing the log waits for the writer's last batch.
CLOSE_WAIT_S: Final = 2.0

#: One request's fields, as the request path leaves them: perf_counter time,
#: client address, principal, protocol version, method, tool/prompt name or
#: resource URI, HTTP status, JSON-RPC error code, duration in seconds,
#: session id.
Record = tuple[float, str, object, str, str, object, int, object, float, "str | None"]
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


class LineFormatter:
    """Turns records into lines, in the writer thread. What repeats from line
    to line is made once and kept, within bounds: the second's timestamp, a
    session's hash, and the run of fields from the client to the JSON-RPC code
    (client, principal, version, method, name, status, code), as text or as
    JSON."""

    __slots__ = (
        "principal_text",
        "_ms",
        "_stamp",
        "_second",
        "_prefix",
        "_hashes",
        "_texts",
        "_jsons",
    )

    def __init__(self, principal_text: PrincipalText = str) -> None:
        self.principal_text = principal_text
        self._ms = self._second = -1
        self._stamp = self._prefix = ""
        self._hashes: dict[str, str] = {}
        self._texts: dict[tuple[object, ...], str] = {}
        self._jsons: dict[tuple[object, ...], str] = {}

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

    def principal(self, principal: object) -> str:
        """A principal as text: a str or an int as it is, others by `principal_text`."""
        if principal is None:
            return "-"
        if type(principal) is str:
            return principal[:MAX_FIELD_CHARS]
        if type(principal) is int:
            return str(principal)
        try:
            return self.principal_text(principal)[:MAX_FIELD_CHARS]
        except Exception:  # (a principal with no text form: logged, not fatal)
            return "?"

    def text_line(self, record: Record, offset: float) -> str:
        t, client, principal, version, method, target, status, code, seconds, session = record
        key = (client, principal, version, method, target, status, code)
        try:
            middle = dict.get(self._texts, key)
        except TypeError:  # (a principal that cannot be a key)
            middle = None
        if middle is None:
            middle = " ".join(
                (
                    _word(client) if client else "-",
                    _word(self.principal(principal)),
                    _word(version),
                    _word(method[:MAX_FIELD_CHARS]),
                    _word(target[:MAX_FIELD_CHARS]) if type(target) is str else "-",
                    str(status),
                    str(code) if type(code) is int else "-",
                )
            )
            self._keep(self._texts, key, middle)
        sid = self.session(session) or "-"
        return f"{self.stamp(t + offset)} {middle} {_micros(seconds)} {sid}\n"

    def json_line(self, record: Record, offset: float) -> str:
        t, client, principal, version, method, target, status, code, seconds, session = record
        key = (client, principal, version, method, target, status, code)
        try:
            middle = dict.get(self._jsons, key)
        except TypeError:
            middle = None
        if middle is None:
            fields = {
                "client": client or "-",
                "principal": self.principal(principal),
                "era": version,
                "method": method[:MAX_FIELD_CHARS],
                "name": target[:MAX_FIELD_CHARS] if type(target) is str else None,
                "status": status,
                "code": code if type(code) is int else None,
            }
            middle = dumps(fields).decode("utf-8", "replace")[1:-1]
            self._keep(self._jsons, key, middle)
        sid = self.session(session)
        quoted = '"' + sid + '"' if sid is not None else "null"
        return (
            f'{{"time":"{self.stamp(t + offset)}",{middle},'
            f'"duration_us":{int(seconds * 1e6)},"session":{quoted}}}\n'
        )

    @staticmethod
    def _keep(
        kept: dict[tuple[object, ...], str],
        key: tuple[object, ...],
        value: str,
    ) -> None:
        if len(kept) >= _KEPT:
            kept.clear()
        try:
            kept[key] = value
        except TypeError:
            pass


def _micros(seconds: float) -> str:
    """A duration as text, in whole microseconds (``"123us"``)."""
    us = int(seconds * 1e6)
    return _MICROS[us] if 0 <= us < _MICROS_KEPT else f"{us}us"


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
