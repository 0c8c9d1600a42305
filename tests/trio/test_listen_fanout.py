"""A server notification reaches the open subscriptions/listen streams in the
order the streams opened.

That is fair (first subscribed, first told), and it is what keeps a fan-out to
10,000 streams fast: the walk follows the order the streams' objects were
allocated in, instead of their addresses' hash order. The streams here are
registered through `ModernTransport.stream_listen` with stand-in writers, in an
order unrelated to the order their objects were created in; the end-to-end
listen tests (tests/mcp/test_modern.py) go through real sockets.
"""

from __future__ import annotations

import random

import trio
import trio.testing

from trio_mcp import Server
from trio_mcp._mcp._endpoint import MCPEndpoint
from trio_mcp._mcp._streams import Listener


class Writer:
    """The streaming side of `ResponseWriter`, recording who opened and who was told."""

    def __init__(self, name: int, opened: list[int], told: list[int]) -> None:
        self.name = name
        self.opened = opened
        self.told = told
        self.broken = False
        self.started = False

    async def start(self, status: int, headers: object, first: bytes = b"") -> None:
        self.started = True
        self.opened.append(self.name)

    def peer_watch(self) -> None:
        return None

    def send_nowait(self, piece: bytes) -> bytes:
        if b"list_changed" in piece:
            self.told.append(self.name)
        return b""

    async def send(self, piece: bytes) -> None:
        self.send_nowait(piece)

    async def send_framed(self, data: bytes) -> None:
        raise AssertionError("the socket took every frame")


async def test_a_notification_reaches_listen_streams_in_the_order_they_opened(nursery) -> None:
    app = Server("fan-out order")

    @app.tool()
    def echo(text: str) -> str:
        return text

    endpoint = MCPEndpoint(app)
    count = 64
    listeners = [Listener(i, {"toolsListChanged": True}, b'"_meta":{}') for i in range(count)]
    order = list(range(count))
    random.Random(7).shuffle(order)  # opened in an order unlike the objects' creation
    opened: list[int] = []
    told: list[int] = []
    async with endpoint.running():
        for i in order:
            writer = Writer(i, opened, told)
            nursery.start_soon(endpoint.modern.stream_listen, listeners[i], [], writer)
            await trio.testing.wait_all_tasks_blocked()
        assert opened == order
        app.notify_tools_changed()
        with trio.fail_after(5):
            while len(told) < count:
                await trio.sleep(0.01)
        assert told == order
