"""Certificates the TLS tests generate: a CA (trustme), a server certificate
for 127.0.0.1 and localhost, and files for the server's ``ssl_*`` settings."""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path

import trio
import trustme


@dataclass
class TLSFiles:
    ca: trustme.CA
    server: trustme.LeafCert
    #: The server's certificate chain and its key, each in its own file.
    certfile: Path
    keyfile: Path
    #: The CA's certificate: what a client trusts, and the server checks
    #: client certificates against.
    ca_file: Path

    def settings(self, **more: object) -> dict[str, object]:
        """ServerConfig settings that serve TLS with this certificate."""
        return {"ssl_certfile": str(self.certfile), "ssl_keyfile": str(self.keyfile), **more}

    def client_context(
        self, alpn: tuple[str, ...] = ("http/1.1",), cert: trustme.LeafCert | None = None
    ) -> ssl.SSLContext:
        """Python's ssl client side, trusting the CA (and presenting `cert`)."""
        context = ssl.create_default_context()
        self.ca.configure_trust(context)
        if alpn:
            context.set_alpn_protocols(list(alpn))
        if cert is not None:
            cert.configure_cert(context)
        return context


def make_tls_files(directory: Path) -> TLSFiles:
    ca = trustme.CA()
    server = ca.issue_cert("127.0.0.1", "localhost")
    certfile = directory / "server.pem"
    keyfile = directory / "server.key"
    ca_file = directory / "ca.pem"
    certfile.write_bytes(b"".join(blob.bytes() for blob in server.cert_chain_pems))
    server.private_key_pem.write_to_path(str(keyfile))
    ca.cert_pem.write_to_path(str(ca_file))
    return TLSFiles(ca, server, certfile, keyfile, ca_file)


async def tls_connect(port: int, context: ssl.SSLContext) -> trio.SSLStream[trio.SocketStream]:
    """A TLS connection to 127.0.0.1:`port`, handshake done."""
    tcp = await trio.open_tcp_stream("127.0.0.1", port)
    stream = trio.SSLStream(tcp, context, server_hostname="127.0.0.1", https_compatible=True)
    try:
        await stream.do_handshake()
    except BaseException:
        await trio.aclose_forcefully(tcp)
        raise
    return stream
