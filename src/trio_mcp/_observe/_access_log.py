"""The access log: one line per JSON-RPC request, written off the event loop.

The request path puts a line's pieces into a bounded buffer (or counts the
line dropped when the buffer is full): strings made once and kept (the
millisecond's timestamp, the client's principal, the request's `Operation`
with its status, the duration from a table, the session's hash), so a line
costs a few list appends and no allocation, and nothing is formatted or
written there. A writer thread wakes every `FLUSH_INTERVAL_S`, takes what
waits, joins it and writes it in one batch, so a slow disk or a pipe nobody
reads costs requests nothing but the lines dropped (`AccessLog.dropped`, a
metric). Putting the pieces together where the request ends, rather than
keeping each request's fields for the writer to format, touches only memory
that is warm there; the fields kept for 50 ms cost more in cache misses than
their formatting did.
"""

from __future__ import annotations

import hashlib
import os
import sys
import threading
import time
from collections.abc import Callable
from random import random
from typing import Final

from .._json import dumps
from ._metrics import Histogram

#: How often the writer thread wakes to write what waits.
FLUSH_INTERVAL_S: Final = 0.05
#: Names, methods and principals longer than this are cut (the client chose them).
MAX_FIELD_CHARS: Final = 200
#: How many session hashes, and principals, the log keeps from line to line.
_KEPT: Final = 4096
#: Durations below this many microseconds are pieces from a table.
_MICROS_KEPT: Final = 10_000
#: HTTP statuses as text, by number.
_STATUSES: Final = tuple(str(status) for status in range(1000))
#: The end of a timestamp, by its millisecond.
_MILLISECONDS: Final = tuple(f".{ms:03d}Z" for ms in range(1000))
#: How long closing the log waits for the writer's last batch.
CLOSE_WAIT_S: Final = 2.0

#: The text form of a principal that is not a str or an int (the endpoint's
#: principal_key); raises TypeError for one it has no key for.
PrincipalText = Callable[[object], str]


class AccessLog:
    """The bounded buffer of pieces and its writer thread (see the module
    docstring). A text line is ``time client principal era method name
    status code duration session``; a JSON line has the same fields."""

    __slots__ = (
        "pieces",
        "waiting",
        "limit",
        "dropped",
        "sample",
        "json",
        "path",
        "principal_text",
        "_stop",
        "_thread",
        "_ms",
        "_second",
        "_stamp",
        "_prefix",
        "_offset",
        "_sessions",
        "_principals",
        "_micros",
        "_no_session",
        "_no_principal",
    )

    def __init__(
        self,
        limit: int,
        sample: float = 1.0,
        json: bool = False,
        path: str | None = None,
        principal_text: PrincipalText = str,
    ) -> None:
        #: The waiting lines' pieces, in order (the writer takes the list whole).
        self.pieces: list[str] = []
        #: The lines in `pieces`, bounded by `limit`.
        self.waiting = 0
        self.limit = limit
        #: Lines dropped because the buffer was full (sampled out: not counted).
        self.dropped = 0
        self.sample = sample
        self.json = json
        #: Appended to; None is stderr.
        self.path = path
        self.principal_text = principal_text
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._ms = self._second = -1
        self._stamp = self._prefix = ""
        #: wall-clock time minus ``perf_counter``, read again each second
        self._offset = time.time() - time.perf_counter()
        #: session id -> the line's last piece (its hash)
        self._sessions: dict[str, str] = {}
        #: principal -> its piece
        self._principals: dict[object, str] = {}
        if json:
            self._micros = tuple(str(us) for us in range(_MICROS_KEPT))
            self._no_session = ',"session":null}\n'
            self._no_principal = '","principal":"-",'
        else:
            self._micros = tuple(f"{us}us " for us in range(_MICROS_KEPT))
            self._no_session = "-\n"
            self._no_principal = " - "

    def add(
        self,
        now: float,
        client: str,
        principal: object,
        operation: Operation,
        status: int,
        seconds: float,
        session_id: str | None,
    ) -> None:
        """One request's line, unless sampled out or the buffer is full:
        `now` is its end (``perf_counter``), `seconds` its duration."""
        if self.sample < 1.0 and random() >= self.sample:
            return
        if self.waiting >= self.limit:
            self.dropped += 1
            return
        self.waiting += 1
        pieces = self.pieces
        ms = int((now + self._offset) * 1000)
        pieces.append(self._stamp if ms == self._ms else self._stamp_of(now))
        pieces.append(client or "-")
        if principal is None:
            pieces.append(self._no_principal)
        else:
            pieces.append(self._principal(principal))
        if status == 200:
            pieces.append(operation.ok)
        else:
            pieces.append(operation.head)
            pieces.append(_status(status))
            pieces.append(operation.tail)
        us = int(seconds * 1e6)
        if 0 <= us < _MICROS_KEPT:
            pieces.append(self._micros[us])
        else:
            pieces.append(str(us) if self.json else f"{us}us ")
        if session_id is None:
            pieces.append(self._no_session)
        else:
            found = dict.get(self._sessions, session_id)
            pieces.append(found if found is not None else self._session(session_id))

    def _stamp_of(self, now: float) -> str:
        """The line's first piece: ISO 8601, UTC, milliseconds (made once a
        millisecond; the clocks' offset read again once a second)."""
        ms = int((now + self._offset) * 1000)
        second = ms // 1000
        if second != self._second:
            self._offset = time.time() - time.perf_counter()
            ms = int((now + self._offset) * 1000)
            second = ms // 1000
            self._second = second
            self._prefix = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
        self._ms = ms
        stamp = self._prefix + _MILLISECONDS[ms % 1000]
        self._stamp = f'{{"time":"{stamp}","client":"' if self.json else stamp + " "
        return self._stamp

    def _session(self, session_id: str) -> str:
        """The line's last piece for a session seen for the first time (kept)."""
        sessions = self._sessions
        if len(sessions) >= _KEPT:
            sessions.clear()
        hashed = session_hash(session_id)
        piece = f',"session":"{hashed}"}}\n' if self.json else hashed + "\n"
        sessions[session_id] = piece
        return piece

    def _principal(self, principal: object) -> str:
        """A principal's piece: a str or an int as it is, others by
        `principal_text` (kept, for principals that can be keys)."""
        try:
            found = dict.get(self._principals, principal)
        except TypeError:  # (a principal that cannot be a key)
            found = None
        if found is not None:
            return found
        if type(principal) is str:
            text = principal[:MAX_FIELD_CHARS]
        elif type(principal) is int:
            text = str(principal)
        else:
            try:
                text = self.principal_text(principal)[:MAX_FIELD_CHARS]
            except Exception:  # (a principal with no text form: logged, not fatal)
                text = "?"
        if self.json:
            found = '","principal":' + dumps(text).decode("utf-8", "replace") + ","
        else:
            found = " " + _word(text) + " "
        if len(self._principals) >= _KEPT:
            self._principals.clear()
        try:
            self._principals[principal] = found
        except TypeError:
            pass
        return found

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
        try:
            stop = self._stop
            while True:
                stopping = stop.wait(FLUSH_INTERVAL_S)
                self._flush(fd)
                if stopping:
                    return
        finally:
            if own:
                os.close(fd)

    def _flush(self, fd: int) -> None:
        # (the list is taken whole and replaced; in the pure build a line
        # being added meanwhile may be split between two batches, which are
        # written in order, so the file is the same)
        pieces = self.pieces
        if not pieces:
            return
        self.pieces = []
        self.waiting = 0
        data = "".join(pieces).encode("utf-8", "replace")
        try:
            while data:
                data = data[os.write(fd, data) :]
        except OSError:
            pass  # (a closed pipe or a full disk: lines are lost, requests go on)


class Operation:
    """What the lines (and the metrics) of requests alike share: one per
    method, target name, outcome and protocol version seen (`Observer`),
    with its histogram (None when metrics are off) and its part of a line,
    made once."""

    __slots__ = ("histogram", "is_error", "version", "ok", "head", "tail")

    def __init__(
        self,
        histogram: Histogram | None,
        method: str,
        name: str | None,
        code: int | None,
        is_error: bool,
        version: str,
        json: bool = False,
    ) -> None:
        self.histogram = histogram
        #: (with the method, name and code the observer finds it by)
        self.is_error = is_error
        self.version = version
        method, name = method[:MAX_FIELD_CHARS], name[:MAX_FIELD_CHARS] if name else name
        if json:
            fields = dumps({"era": version, "method": method, "name": name})
            code_json = str(code) if code is not None else "null"
            #: the line from the principal to the duration: with status 200
            #: (`ok`), or around another status (`head`, `tail`)
            self.head = fields.decode("utf-8", "replace")[1:-1] + ',"status":'
            self.tail = f',"code":{code_json},"duration_us":'
        else:
            name_word = _word(name) if name is not None else "-"
            self.head = f"{_word(version)} {_word(method)} {name_word} "
            self.tail = f" {code if code is not None else '-'} "
        self.ok = self.head + "200" + self.tail


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
