"""`RedisRequestRegistry`: a client may answer a request the server sent it,
or cancel a request it sent, on any process.

What runs and what waits is this process's (a `MemoryRequestRegistry`); what
is added is the forwarding. A request to the client gets an id that names
the process waiting for its answer: ``process number * 2**29 + its number
here`` (the process number is 24 random bits, so ids stay within 2**53, the
integers every JSON parser keeps exact). An answer that arrives elsewhere is
published to that process's channel (``<prefix>:answers:<number>``), which
hands it to the waiter. A ``notifications/cancelled`` for a request that
does not run here goes to every process (``<prefix>:cancel``): the one
running it cancels it. Both are published by a task of their own, since
these calls do not wait (`RequestRegistry`); a queue of `QUEUE` bounds what
waits for it (beyond, the answer is dropped and the request times out, as
it would if the client never answered).

Not shared: the ids a session has running (`ID_IN_USE` is per process) and
its quotas, which hold per process.
"""

from __future__ import annotations

import logging
import secrets
from typing import Any, Final

import trio

from .._http._handler import Cancellable
from .._json import dumps, loads
from .._protocol._jsonrpc import RequestId, RPCResponse
from ._redis import RedisLink
from ._requests import Answerable, MemoryRequestRegistry

logger = logging.getLogger("trio_mcp.redis")

#: A request to the client is numbered in the low bits of its id.
LOCAL_BITS: Final = 29
LOCAL_IDS: Final = 1 << LOCAL_BITS
#: Forwarded answers and cancellations waiting to be published.
QUEUE: Final = 1024


class RedisRequestRegistry:
    """Requests in flight here; answers and cancellations forwarded (see above)."""

    def __init__(self, link: RedisLink, max_running: int, max_waiting: int) -> None:
        self.link = link
        self.local = MemoryRequestRegistry(max_running, max_waiting)
        self.number = secrets.randbits(24)
        self._base = self.number * LOCAL_IDS
        self._cancel_channel = link.key("cancel").encode()
        self._send, self._outbox = trio.open_memory_channel[tuple[bytes, bytes]](QUEUE)
        link.handlers[self._answers_channel(self.number)] = self._answered
        link.handlers[self._cancel_channel] = self._cancelled
        link.tasks.append(self._publish)

    def _answers_channel(self, number: int) -> bytes:
        return self.link.key("answers", f"{number:06x}").encode()

    # ---- what other processes forward -----------------------------------------

    def _answered(self, message: bytes) -> None:
        forwarded = loads(message)
        response = RPCResponse(forwarded["i"], forwarded.get("r"), forwarded.get("e"))
        self._answer_here(forwarded["s"], response)

    def _cancelled(self, message: bytes) -> None:
        forwarded = loads(message)
        if forwarded["p"] != self.number:
            self.local.cancel(forwarded["s"], forwarded["i"])

    def _forward(self, channel: bytes, message: dict[str, Any]) -> None:
        try:
            self._send.send_nowait((channel, dumps(message)))
        except trio.WouldBlock:
            logger.warning("Redis: %d messages wait to be forwarded; one dropped", QUEUE)

    async def _publish(self) -> None:
        """Publish what `answer` and `cancel` forward, until cancelled."""
        link = self.link
        async for channel, message in self._outbox:
            try:
                await link.client.publish(channel, message)
            except Exception as error:  # (Redis is away, say: as if the client never sent it)
                logger.warning("Redis: could not forward a message (%s)", error)

    # ---- the RequestRegistry protocol -----------------------------------------

    def begin(self, session_id: str, request_id: RequestId, scope: Cancellable) -> int:
        return self.local.begin(session_id, request_id, scope)

    def end(self, session_id: str, request_id: RequestId) -> None:
        self.local.end(session_id, request_id)

    def cancel(self, session_id: str, request_id: object) -> None:
        if not isinstance(request_id, str | int):
            return
        self.local.cancel(session_id, request_id)
        message = {"s": session_id, "i": request_id, "p": self.number}
        self._forward(self._cancel_channel, message)  # (it may run elsewhere)

    def release(self, session_id: str) -> None:
        self.local.release(session_id)

    def expect(self, session_id: str, waiter: Answerable) -> int | None:
        request_id = self.local.expect(session_id, waiter)
        if request_id is None:
            return None
        if request_id >= LOCAL_IDS:  # (2**29 requests to one client from here: give up)
            self.local.forget(session_id, request_id)
            return None
        return self._base + request_id

    def answer(self, session_id: str, response: RPCResponse) -> None:
        request_id = response.id
        if type(request_id) is not int or request_id < 0:
            return
        number = request_id // LOCAL_IDS
        if number == self.number:
            self._answer_here(session_id, response)
        elif number < 1 << 24:
            message = {"s": session_id, "i": request_id, "r": response.result}
            if response.error is not None:
                message["e"] = response.error
            self._forward(self._answers_channel(number), message)

    def _answer_here(self, session_id: str, response: RPCResponse) -> None:
        local_id = response.id - self._base  # type: ignore[operator]
        self.local.answer(session_id, RPCResponse(local_id, response.result, response.error))

    def forget(self, session_id: str, request_id: int) -> None:
        self.local.forget(session_id, request_id - self._base)

    def busy(self) -> set[str]:
        return self.local.busy()

    def running(self) -> int:
        return self.local.running()

    def waiting(self) -> int:
        return self.local.waiting()

    def entries(self) -> int:
        return self.local.entries()
