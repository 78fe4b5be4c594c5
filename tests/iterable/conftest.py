"""Real ``wurk`` workers running the iterable test applications."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.helpers import WorkerPool

FAST = {"TEST_POLL_INTERVAL": "0.2", "TEST_HEARTBEAT_INTERVAL": "0.5"}


@pytest.fixture
def workers(config, redis_url, tmp_path) -> Iterator[WorkerPool]:
    pool = WorkerPool(redis_url, tmp_path, "tests.iterable.iterable_app", FAST)
    yield pool
    pool.stop_all()


def events(redis) -> list[str]:
    return [entry.decode() for entry in redis.lrange("events", 0, -1)]


def seen(redis) -> int:
    return int(redis.bitcount("seen"))


def calls(redis) -> int:
    return int(redis.get("calls") or 0)
