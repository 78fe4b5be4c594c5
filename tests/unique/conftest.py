"""Unique jobs on for a test, off again after it, and real workers on the
unique-job test application."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import wurk
import wurk_unique
from tests.helpers import WorkerPool
from tests.worker.conftest import FAST


@pytest.fixture
def unique(config: wurk.Config) -> Iterator[wurk.Config]:
    """The test's configuration with unique jobs enabled."""
    wurk_unique.enable()
    try:
        yield config
    finally:
        wurk_unique.disable()


@pytest.fixture
def unique_workers(config, redis_url, tmp_path) -> Iterator[WorkerPool]:
    pool = WorkerPool(redis_url, tmp_path, "tests.unique.unique_app", FAST)
    yield pool
    pool.stop_all()
