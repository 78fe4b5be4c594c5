"""Wurk's own fetcher against the contract any custom fetcher must meet."""

from __future__ import annotations

import pytest

from wurk.fetch import ReliableFetcher
from wurk.identity import ProcessIdentity
from wurk.testing.fetcher_contract import FetcherContract


class TestReliableFetcher(FetcherContract):
    @pytest.fixture
    def make_fetcher(self, config):
        made = []

        def make(*queues, concurrency=1):
            config.queues = list(queues)
            config.concurrency = concurrency
            config["fetch_poll_interval"] = 0.2
            fetcher = ReliableFetcher(config.default_capsule, ProcessIdentity.current())
            made.append(fetcher)
            return fetcher

        yield make
        for fetcher in made:
            fetcher.quiet()
            for thread in fetcher._waiters:
                thread.join(5)
