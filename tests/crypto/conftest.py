"""Encryption on for a test with the test keys, off again after it, and real
workers on the encryption test application."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import wurk
import wurk_crypto
from tests.crypto.keys import pusher_resolver
from tests.helpers import WorkerPool
from tests.worker.conftest import FAST


@pytest.fixture
def crypto(config: wurk.Config) -> Iterator[wurk.Config]:
    """The test's configuration with encryption enabled, active version 2."""
    wurk_crypto.enable(2, pusher_resolver)
    try:
        yield config
    finally:
        wurk_crypto.disable()


@pytest.fixture
def crypto_workers(config, redis_url, tmp_path) -> Iterator[WorkerPool]:
    pool = WorkerPool(redis_url, tmp_path, "tests.crypto.crypto_app", FAST)
    yield pool
    pool.stop_all()
