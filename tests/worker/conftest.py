"""Starting real ``wurk`` worker processes against the test server."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.helpers import WorkerPool
from wurk.server.fetch import ReliableFetcher
from wurk.server.identity import ProcessIdentity

FAST = {
    "TEST_POLL_INTERVAL": "0.2",
    "TEST_HEARTBEAT_INTERVAL": "0.5",
}


@pytest.fixture
def workers(config, redis_url, tmp_path) -> Iterator[WorkerPool]:
    pool = WorkerPool(redis_url, tmp_path, "tests.worker.worker_app", FAST)
    yield pool
    pool.stop_all()


@pytest.fixture
def fetcher_for(config):
    """Makes fetchers on the test server (a short poll interval); their waiter
    threads end after the test, and their claim ledgers' books must add up
    then."""
    made = []

    def make(*queues, concurrency=1):
        config.concurrency = concurrency
        config.queues = list(queues)
        config["fetch_poll_interval"] = 0.2
        fetcher = ReliableFetcher(config.default_capsule, ProcessIdentity.current())
        made.append(fetcher)
        return fetcher

    yield make
    for fetcher in made:
        fetcher.quiet()
        for thread in fetcher.waiters.threads:
            thread.join(5)
        with fetcher.ledger.lock:
            try:
                fetcher.ledger.check()
            finally:
                fetcher.ledger.close()  # the next test's fetchers share this process's gate
