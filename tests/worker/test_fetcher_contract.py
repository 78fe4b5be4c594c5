"""Wurk's own fetcher against the contract any custom fetcher must meet."""

from __future__ import annotations

import pytest

from wurk.testing.fetcher_contract import FetcherContract


class TestReliableFetcher(FetcherContract):
    @pytest.fixture
    def make_fetcher(self, fetcher_for):
        return fetcher_for
