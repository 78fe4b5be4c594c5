"""Real ``wurk`` worker processes running :mod:`tests.metrics.metrics_app`."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.helpers import WorkerPool

FAST = {
    "TEST_POLL_INTERVAL": "0.2",
    "TEST_HEARTBEAT_INTERVAL": "0.3",
    "TEST_METRICS_FLUSH_INTERVAL": "0.3",
    "TEST_METRICS_ROLLUP_INTERVAL": "0.3",
}


@pytest.fixture
def workers(config, redis_url, tmp_path) -> Iterator[WorkerPool]:
    pool = WorkerPool(redis_url, tmp_path, "tests.metrics.metrics_app", FAST)
    yield pool
    pool.stop_all()
