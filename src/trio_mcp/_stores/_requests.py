"""The request registry seam: the requests a session has in flight, and the
requests the server sent its client that wait for an answer.

Contract (what a registry must give, so that a shared one can take the
memory one's place without a change to the endpoint):

- `begin` registers a running request under its session and JSON-RPC id,
  atomically, and refuses an id the session already has running
  (`ID_IN_USE`), or any request of a session that has its quota of requests
  running here (`TOO_MANY`); `end` removes it. `cancel` cancels the request
  with that id (a shared registry forwards it to the process that runs it);
  `release` cancels everything a session has running and forgets what it
  waits for.
- `expect` gives a request to the client an id unique within its session and
  registers what waits for the answer, or None when the session has its
  quota of requests waiting for answers; `answer` hands a response to it (a
  shared registry forwards it, since the answer may arrive at another
  process); `forget` removes it, answered or not.
- `busy` names the sessions with a request running here, so the sweeper
  keeps them from expiring (a shared registry also renews the leases its
  processes hold on them). A request that ended since the last sweep needs
  nothing: its session was last touched at most one sweep before it ended,
  which the session store's grace covers.
- These calls are synchronous: what they keep is what this process runs. A
  shared registry keeps the same in memory and adds the forwarding above
  over the bus; nothing here waits for it.
"""

from __future__ import annotations

from typing import Any, Final, Protocol

from .._http._handler import Cancellable
from .._protocol._jsonrpc import RequestId, RPCResponse

#: What `RequestRegistry.begin` answers: the request is registered (falsy,
#: so the caller tests it with one truth test), or why it is refused.
BEGUN: Final = 0
ID_IN_USE: Final = 1
TOO_MANY: Final = 2


class Answerable(Protocol):
    """What waits for the client's answer to a request the server sent."""

    def resolve(self, response: RPCResponse) -> None: ...


class RequestRegistry(Protocol):
    """The requests in flight (see the module docstring)."""

    def begin(self, session_id: str, request_id: RequestId, scope: Cancellable) -> int:
        """Register a running request: `BEGUN`, or `ID_IN_USE`, `TOO_MANY`."""
        ...

    def end(self, session_id: str, request_id: RequestId) -> None: ...

    def cancel(self, session_id: str, request_id: object) -> None:
        """Cancel the session's running request with this id, if there is one."""
        ...

    def release(self, session_id: str) -> None:
        """The session ended: cancel what it runs, forget what it waits for."""
        ...

    def expect(self, session_id: str, waiter: Answerable) -> int | None:
        """Register `waiter` for a request to the client; the request's id
        (None: the session has its quota of requests waiting)."""
        ...

    def answer(self, session_id: str, response: RPCResponse) -> None:
        """The client answered; nothing happens for an id nobody waits for."""
        ...

    def forget(self, session_id: str, request_id: int) -> None: ...

    def busy(self) -> set[str]:
        """The sessions with a request running here."""
        ...

    def running(self) -> int:
        """How many requests run in this process (for statistics)."""
        ...

    def waiting(self) -> int:
        """How many requests to clients wait for answers here (for statistics)."""
        ...

    def entries(self) -> int:
        """How many sessions have an entry here (for statistics: a released
        session has none)."""
        ...


class _SessionRequests:
    """One session's requests in flight, here."""

    __slots__ = ("running", "waiting", "last_id")

    def __init__(self) -> None:
        self.running: dict[Any, Cancellable] = {}
        self.waiting: dict[int, Answerable] = {}
        self.last_id = 0


class MemoryRequestRegistry:
    """The requests in flight in this process (the default). A session's entry
    lives until its release, so the ids of its requests to the client are
    never reused while it lives."""

    __slots__ = ("_sessions", "max_running", "max_waiting")

    def __init__(self, max_running: int, max_waiting: int) -> None:
        self._sessions: dict[str, _SessionRequests] = {}
        #: A session's quotas: requests running here, requests to its client waiting.
        self.max_running = max_running
        self.max_waiting = max_waiting

    def _of(self, session_id: str) -> _SessionRequests:
        requests = dict.get(self._sessions, session_id)
        if requests is None:
            requests = self._sessions[session_id] = _SessionRequests()
        return requests

    def begin(self, session_id: str, request_id: RequestId, scope: Cancellable) -> int:
        running = self._of(session_id).running
        if request_id in running:
            return ID_IN_USE
        if len(running) >= self.max_running:
            return TOO_MANY
        running[request_id] = scope
        return BEGUN

    def end(self, session_id: str, request_id: RequestId) -> None:
        requests = dict.get(self._sessions, session_id)
        if requests is None:
            return
        requests.running.pop(request_id, None)

    def cancel(self, session_id: str, request_id: object) -> None:
        requests = dict.get(self._sessions, session_id)
        if requests is None or not isinstance(request_id, str | int):
            return
        scope = requests.running.get(request_id)
        if scope is not None:
            scope.cancel()

    def release(self, session_id: str) -> None:
        requests = self._sessions.pop(session_id, None)
        if requests is not None:
            for scope in requests.running.values():
                scope.cancel()

    def expect(self, session_id: str, waiter: Answerable) -> int | None:
        requests = self._of(session_id)
        if len(requests.waiting) >= self.max_waiting:
            return None
        requests.last_id += 1
        requests.waiting[requests.last_id] = waiter
        return requests.last_id

    def answer(self, session_id: str, response: RPCResponse) -> None:
        requests = dict.get(self._sessions, session_id)
        if requests is None or type(response.id) is not int:
            return
        waiter = requests.waiting.get(response.id)
        if waiter is not None:
            waiter.resolve(response)

    def forget(self, session_id: str, request_id: int) -> None:
        requests = dict.get(self._sessions, session_id)
        if requests is not None:
            requests.waiting.pop(request_id, None)

    def busy(self) -> set[str]:
        return {s for s, requests in self._sessions.items() if requests.running}

    def running(self) -> int:
        return sum(len(requests.running) for requests in self._sessions.values())

    def waiting(self) -> int:
        return sum(len(requests.waiting) for requests in self._sessions.values())

    def entries(self) -> int:
        return len(self._sessions)
