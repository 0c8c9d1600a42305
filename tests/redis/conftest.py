from __future__ import annotations

import pytest
from redis_fixtures import (  # noqa: F401
    COREDIS_LEFTOVERS,
    collect_coredis_leftovers,
    start_redis,
    start_replica,
)

pytestmark = pytest.mark.filterwarnings(COREDIS_LEFTOVERS)
