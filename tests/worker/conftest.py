"""Starting real ``wurk`` worker processes against the test server."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.helpers import WorkerPool

FAST = {
    "TEST_POLL_INTERVAL": "0.2",
    "TEST_HEARTBEAT_INTERVAL": "0.5",
}


@pytest.fixture
def workers(config, redis_url, tmp_path) -> Iterator[WorkerPool]:
    pool = WorkerPool(redis_url, tmp_path, "tests.worker.worker_app", FAST)
    yield pool
    pool.stop_all()
