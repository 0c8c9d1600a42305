from __future__ import annotations

from nginx_fixtures import start_mcp_upstream, start_nginx  # noqa: F401
from replica_fixtures import start_proxy, start_replicas  # noqa: F401
