"""A served TCP connection has Nagle's delay off (``TCP_NODELAY``): a small
answer goes at once, not after the peer's delayed ACK."""

from __future__ import annotations

import socket

import trio
from _support import connect, post, start_ok_server

from trio_mcp._trio._socketio import SocketIO


async def test_the_server_turns_nagle_s_delay_off_on_every_tcp_connection() -> None:
    async with trio.open_nursery() as nursery:
        server = await start_ok_server(nursery)
        client = await connect(server.ports[0])
        await client.send(post())
        assert (await client.read_reply()).status == 200
        (conn,) = server._connections
        io = conn.interruptible
        assert isinstance(io, SocketIO)
        assert io.sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 1
        await client.stream.aclose()
        nursery.cancel_scope.cancel()


def test_a_unix_socket_is_served_too() -> None:
    ours, theirs = socket.socketpair()  # (as the peers' hops are)
    with ours, theirs:
        io = SocketIO(ours)  # (the TCP option's refusal is not an error)
        io.send_nowait(b"x")
        assert theirs.recv(1) == b"x"
