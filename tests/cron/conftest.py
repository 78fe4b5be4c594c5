"""Fixtures of the periodic-job tests: a leader of the test server, a clock."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from wurk.server.leader import SERVICE, Leader


class Clock:
    """A settable time source for the poller (epoch seconds)."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def leader(config) -> Iterator[Leader]:
    """This process leads the test server (registered where the poller asks)."""
    elected = Leader(config, "cron-test:1:aaaaaaaaaaaa")
    assert elected.campaign()
    config.register(SERVICE, elected)
    yield elected
    elected.stop()
