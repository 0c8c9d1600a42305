"""TLS in the trio shell: the server's SSL context, built once at start-up from
``ServerConfig``'s ``ssl_*`` settings, and the byte stream of a TLS connection
(trio's `SSLStream` over the connection's `SocketIO`).

The server runs the handshake before the connection's first read, as a phase
the sweeper sees as a request head still arriving (`handshake`).
Past the handshake a TLS connection is served as any trio stream; what that
switches off, and why:

- Batch-end sends (`SocketIO.hold`): an answer is encrypted by
  `SSLStream.send_all` on the connection's own task, which awaits the socket;
  there is no plaintext to hand the socket without a coroutine, and holding
  the ciphertext would hold that task until the batch ends.
- Ending an overdue head by `SocketIO.interrupt`: its 408 goes out with
  `send_nowait`, as plaintext, and a read side shut down mid-stream reads
  under TLS as a truncated stream, not as the end of a head. An overdue TLS
  head is cancelled instead, and answered 408 over the encrypted stream.
- Watching the client of a long answer (`ConnectionWriter.watch_peer`): the
  socket's readiness cannot tell TLS records (a close_notify, a key update)
  from a client's next request or its leaving.

TLS has no half-close, so `TLSStream.send_eof` (the lingering close after a
last answer) sends close_notify, shuts down the TCP write side, and reads
what the client still sends raw, to drop it.
"""

from __future__ import annotations

import logging
import ssl
from math import inf
from typing import Final, NoReturn

import trio

from .._config import ServerConfig
from .._errors import TLSConfigError
from .._http._connection import HEAD, IDLE
from .._http._forwarded import NO_PROXY
from ._connection import Connection
from ._socketio import SocketIO

logger = logging.getLogger("trio_mcp.server")

_CERT_REQS: Final = {
    "none": ssl.CERT_NONE,
    "optional": ssl.CERT_OPTIONAL,
    "required": ssl.CERT_REQUIRED,
}


def server_context(config: ServerConfig) -> ssl.SSLContext | None:
    """The SSL context to serve `config` with (None: TLS is off), built from
    its ``ssl_*`` settings: TLS 1.2 at least, ALPN offering ``http/1.1``, no
    renegotiation. A file that cannot be used raises `TLSConfigError`, whose
    message names the setting, the file and the reason in one line."""
    certfile = config.ssl_certfile
    if certfile is None:
        return None
    keyfile = config.ssl_keyfile
    cafile = config.ssl_ca_certs
    for name, path in (
        ("ssl_certfile", certfile),
        ("ssl_keyfile", keyfile),
        ("ssl_ca_certs", cafile),
    ):
        if path is not None:
            _check_readable(name, path)
    _check_has_certificates("ssl_certfile", certfile)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.options |= ssl.OP_NO_RENEGOTIATION  # (a client could make us work on demand)
    context.set_alpn_protocols(["http/1.1"])
    key_name, key_path = (
        ("ssl_keyfile", keyfile) if keyfile is not None else ("ssl_certfile", certfile)
    )
    password = config.ssl_keyfile_password

    def give_password() -> str:
        # (without a callback, OpenSSL would ask for it on the terminal)
        if password is None:
            raise TLSConfigError(
                f"{key_name} {key_path}: the private key is encrypted and "
                "ssl_keyfile_password is not set"
            )
        return password

    try:
        context.load_cert_chain(certfile, keyfile, give_password)
    except ssl.SSLError as exc:
        if exc.reason == "KEY_VALUES_MISMATCH":
            _fail(f"{key_name} {key_path}: the private key does not match the certificate")
        wrong = ", or ssl_keyfile_password is wrong" if password is not None else ""
        _fail(f"{key_name} {key_path}: no usable PEM private key in it{wrong}")
    except OSError as exc:  # (removed or made unreadable since the check)
        _fail(f"{key_name} {key_path}: cannot read it: {exc.strerror or exc}")
    if cafile is not None:
        _check_has_certificates("ssl_ca_certs", cafile)
        context.load_verify_locations(cafile=cafile)
    context.verify_mode = _CERT_REQS[config.ssl_cert_reqs]
    return context


def _fail(message: str) -> NoReturn:
    raise TLSConfigError(message) from None


def _check_readable(name: str, path: str) -> None:
    try:
        with open(path, "rb") as file:
            file.read(1)
    except OSError as exc:
        _fail(f"{name} {path}: cannot read it: {exc.strerror or exc}")


def _check_has_certificates(name: str, path: str) -> None:
    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_verify_locations(cafile=path)
    except ssl.SSLError:
        _fail(f"{name} {path}: no PEM certificate in it")
    except OSError as exc:
        _fail(f"{name} {path}: cannot read it: {exc.strerror or exc}")


class _Transport(trio.abc.Stream):
    """The `SocketIO` under an `SSLStream`: what trio's stream needs of it
    (a size for reads that ask none), and a close that only half-closes, so
    that `SSLStream.aclose` sends close_notify and then a FIN while the
    socket stays open to read (`TLSStream.send_eof`)."""

    __slots__ = ("raw", "_chunk")

    def __init__(self, raw: SocketIO, chunk: int) -> None:
        self.raw = raw
        self._chunk = chunk

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        return await self.raw.receive_some(max_bytes or self._chunk)

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await self.raw.send_all(bytes(data))

    async def wait_send_all_might_not_block(self) -> None:
        await trio.lowlevel.wait_writable(self.raw.sock)

    async def aclose(self) -> None:
        await self.raw.send_eof()


class TLSStream:
    """The byte stream of a TLS connection: an `SSLStream` (server side) over
    the connection's `SocketIO` (`raw`), which `aclose` always closes."""

    __slots__ = ("ssl", "raw", "_eof_sent")

    def __init__(self, raw: SocketIO, context: ssl.SSLContext, chunk: int) -> None:
        self.raw = raw
        self.ssl = trio.SSLStream(_Transport(raw, chunk), context, server_side=True)
        self._eof_sent = False

    async def receive_some(self, max_bytes: int) -> bytes | bytearray:
        if self._eof_sent:
            return await self.raw.receive_some(max_bytes)  # (dropped by the lingering close)
        return await self.ssl.receive_some(max_bytes)

    async def send_all(self, data: bytes) -> None:
        await self.ssl.send_all(data)

    async def send_eof(self) -> None:
        """close_notify, then the TCP half-close; reads return raw bytes from now."""
        self._eof_sent = True
        await self.ssl.aclose()

    async def aclose(self) -> None:
        try:
            await self.ssl.aclose()
        finally:
            self.raw.close()


async def handshake(tls: TLSStream, conn: Connection, timeout_s: float) -> bool:
    """Run a connection's TLS handshake, within `timeout_s` and timed as a
    request head: the sweeper counts it among the heads still arriving and
    shortens its limit with theirs, so half-open handshakes cannot crowd out
    requests. False (and a debug line) when it fails: plain HTTP sent to the
    TLS port, a client certificate refused, a client gone."""
    http = conn.http
    http.phase = HEAD  # (the sweeper's view only: the parser has read nothing)
    conn.limit_phase(timeout_s)
    try:
        await tls.ssl.do_handshake()
    except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
        logger.debug(
            "TLS handshake with %s failed: %s", http.client or "a client", exc.__cause__ or exc
        )
        return False
    finally:
        # (not HEAD: a handshake cut short gets no 408, which it could not read)
        http.phase = IDLE
        conn.limit = inf
    # Requests on this connection say https (unless a trusted proxy's headers
    # say otherwise): NO_PROXY gives a direct client's requests the branch
    # that sets their scheme.
    http.scheme = "https"
    if http.proxy is None:
        http.proxy = NO_PROXY
    return True
