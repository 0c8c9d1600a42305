"""The stores: the four seams through which the endpoint reaches shared state.

- `SessionStore` (``_sessions.py``): the session records of the 2025 revisions;
- `EventStore` (``_events.py``): a session's events, kept for resumption;
- `Bus` (``_bus.py``): the live streams a frame goes to;
- `RequestRegistry` (``_requests.py``): requests in flight, and requests to
  the client waiting for their answers.

Each module writes its contract down (what is atomic, what may be eventually
consistent, what is async because a network store needs a round trip) and
holds the in-memory implementation, the fast default. `Stores` is the four
together, as an endpoint takes them. ``_redis*.py`` hold the implementations
on Redis (``MCPConfig.redis_url``), which several processes share.
"""
