"""Real ``wurk`` workers running the batch test application."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from tests.helpers import WorkerPool

FAST = {"TEST_POLL_INTERVAL": "0.2", "TEST_HEARTBEAT_INTERVAL": "0.5"}


@pytest.fixture
def workers(config, redis_url, tmp_path) -> Iterator[WorkerPool]:
    pool = WorkerPool(redis_url, tmp_path, "tests.batches.batch_app", FAST)
    yield pool
    pool.stop_all()


def callbacks(redis) -> list[list]:
    """What the app's callbacks recorded: [event, bid, options, order, seen]."""
    return [json.loads(entry) for entry in redis.lrange("callbacks", 0, -1)]


def heard(redis, bid: str) -> list[str]:
    return [entry[0] for entry in callbacks(redis) if entry[1] == bid]
