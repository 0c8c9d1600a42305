"""`RedisBroadcast`: what the application broadcasts on one process reaches
the sessions of every process sharing the Redis, once each.

A notification for every session (a list changed, a resource updated, a log
message) starts on the process whose application sent it. That process
delivers it to its own audience and publishes it on ``<prefix>:broadcast``
(with its name first, so that it skips its own); every other process
delivers it to its audience. A process's audience is the sessions it made,
while it lives, and the sessions whose GET stream it holds whose maker is
gone (`RedisSessionStore.audience`): a session is heard from exactly one
process, and a client whose maker died hears the others' notifications on
the GET stream it resumed elsewhere.

"Gone" is read in Redis: a process's subscription to its own channel ends
when its connection closes, which Redis sees at once when the process is
killed; and each process keeps a key while it runs
(``<prefix>:alive:<process>``, renewed every `ALIVE_RENEW_S`, lapsing after
`ALIVE_S`, deleted when it stops), for a host that vanished with its
connection left half open: its sessions miss what is broadcast until the
key lapses. So do sessions whose maker is gone and whose GET stream nobody
holds (nothing is stored for them; a client that resumes later does not
get it), and every session while Redis's pub/sub is down (when a maker's
subscription is being made again, a holder may take it for gone, and its
session hear a notification twice).

The notifications to publish wait in a queue bounded in bytes
(``peer_broadcast_queue_bytes``); one that does not fit is dropped, counted
(`dropped`, a metric) and logged.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Final

import trio

from ._redis import RedisLink, logger

#: How long a process counts as alive without renewing its key, and how often
#: it renews it.
ALIVE_S: Final = 3.0
ALIVE_RENEW_S: Final = 1.0


class RedisBroadcast:
    """This process's notifications to the others, and theirs to it (see
    the module docstring); `on_message` is where theirs go (set by the endpoint)."""

    def __init__(self, link: RedisLink, max_queued_bytes: int) -> None:
        self.link = link
        self.channel = link.key("broadcast").encode()
        self.on_message: Callable[[bytes], None] = _nowhere
        #: Notifications not published (the queue was full, or Redis failed).
        self.dropped = 0
        self.max_queued_bytes = max_queued_bytes
        self._queue: list[bytes] = []
        self._queued_bytes = 0
        self._wake = trio.Event()
        self._origin = link.process.encode() + b" "
        link.handlers[self.channel] = self._heard
        link.tasks.append(self._publish)
        link.tasks.append(self._stay_alive)

    def send(self, message: bytes) -> int:
        """Publish `message` (a `_fanout.peer_message`) to the other processes
        soon; returns how many messages that took (0: dropped)."""
        size = len(message)
        if self._queued_bytes + size > self.max_queued_bytes:
            self.dropped += 1
            logger.warning(
                "Redis: a broadcast did not fit the queue (%d bytes waiting): "
                "the other processes' sessions miss it (%d dropped so far)",
                self._queued_bytes,
                self.dropped,
            )
            return 0
        self._queue.append(message)
        self._queued_bytes += size
        self._wake.set()
        return 1

    def _heard(self, data: bytes) -> None:
        if not data.startswith(self._origin):  # (this process's own: delivered here already)
            self.on_message(data.partition(b" ")[2])

    async def _publish(self) -> None:
        """Publish what waits, in one round trip, until cancelled."""
        link = self.link
        while True:
            await self._wake.wait()
            self._wake = trio.Event()
            batch, self._queue, self._queued_bytes = self._queue, [], 0
            try:
                async with link.client.pipeline(transaction=False) as pipeline:
                    for message in batch:
                        pipeline.publish(self.channel, self._origin + message)
            except Exception as error:
                self.dropped += len(batch)
                logger.warning("Redis: %d broadcasts not published: %r", len(batch), error)

    async def _stay_alive(self) -> None:
        """Keep this process's key while it runs; delete it when it stops, so
        that the streams of its sessions held elsewhere hear the others at once."""
        link = self.link
        key = link.key("alive", link.process)
        ms = math.ceil(ALIVE_S * 1000)
        try:
            while True:
                try:
                    await link.client.set(key, b"1", px=ms)
                except Exception:
                    pass  # (Redis is away: the key lapses, and is made again later)
                await trio.sleep(ALIVE_RENEW_S)
        finally:
            with trio.move_on_after(1) as cleanup:
                cleanup.shield = True
                try:
                    await link.client.delete([key])
                except Exception:
                    pass  # (it lapses by itself)


def _nowhere(message: bytes) -> None:
    """Where broadcasts go until the endpoint says."""
