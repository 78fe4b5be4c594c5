"""A contract test suite for fetchers: what any ``config["fetch_class"]`` must do.

A custom fetcher replaces the part of a worker that decides what at-least-once
means, so it should pass the same checks as Wurk's own. Subclass
:class:`FetcherContract` in a pytest module and provide two fixtures: ``redis``
(a ``redis.Redis`` client on an empty database of a real server) and
``make_fetcher`` (a function ``make_fetcher(*queues, concurrency=1)`` returning
a fresh fetcher on that server whose ``fetch_poll_interval`` is short, say
0.2 s)::

    from wurk.testing.fetcher_contract import FetcherContract

    class TestMyFetcher(FetcherContract):
        @pytest.fixture
        def make_fetcher(self, config):
            def make(*queues, concurrency=1):
                config.queues = list(queues)
                config.concurrency = concurrency
                config["fetch_poll_interval"] = 0.2
                return MyFetcher(config.default_capsule, ProcessIdentity.current())
            return make

Every check works on Redis state and on what the fetcher returns, never on
its internals: a job claimed and not acknowledged must still be in Redis, an
acknowledged one must be gone, and a job given back must be fetched again.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from wurk.client.payload import new_jid

POLL_MARGIN = 5.0


def _payload(queue: str, label: str) -> str:
    return json.dumps({"class": "ContractJob", "args": [label], "jid": new_jid(), "queue": queue})


def _label(uow: Any) -> str:
    label: str = json.loads(uow.job)["args"][0]
    return label


def _everywhere(redis: Any) -> list[bytes]:
    """Every job in any queue or private list: where a job must be until acknowledged."""
    found: list[bytes] = []
    for key in redis.scan_iter("queue:*"):
        if redis.type(key) == b"list":
            found += redis.lrange(key, 0, -1)
    return found


class FetcherContract:
    """The checks; see the module's docstring for the two fixtures to provide."""

    def push(self, redis: Any, queue: str, *labels: str) -> None:
        """Jobs labelled in order, the first oldest (fetched first)."""
        for label in labels:
            redis.lpush(f"queue:{queue}", _payload(queue, label))

    def test_a_claimed_job_stays_in_redis_until_acknowledged(
        self, redis: Any, make_fetcher: Callable[..., Any]
    ) -> None:
        fetcher = make_fetcher("default")
        self.push(redis, "default", "one")
        uow = fetcher.retrieve_work()
        assert _label(uow) == "one"
        assert uow.queue == "default"
        assert redis.llen("queue:default") == 0
        assert [json.loads(job)["args"] for job in _everywhere(redis)] == [["one"]]
        uow.acknowledge()
        fetcher.flush_acks()
        assert _everywhere(redis) == []
        fetcher.quiet()

    def test_jobs_come_oldest_first_and_none_when_empty(self, redis: Any, make_fetcher: Callable[..., Any]) -> None:
        fetcher = make_fetcher("default")
        self.push(redis, "default", "a", "b", "c")
        seen = []
        for _ in range(3):
            uow = fetcher.retrieve_work()
            seen.append(_label(uow))
            uow.acknowledge()
        assert seen == ["a", "b", "c"]
        started = time.monotonic()
        assert fetcher.retrieve_work() is None
        assert time.monotonic() - started < POLL_MARGIN
        fetcher.flush_acks()
        assert _everywhere(redis) == []
        fetcher.quiet()

    def test_a_job_given_back_is_fetched_again_first(self, redis: Any, make_fetcher: Callable[..., Any]) -> None:
        fetcher = make_fetcher("default")
        self.push(redis, "default", "back", "next")
        uow = fetcher.retrieve_work()
        assert fetcher.requeue([uow]) == 1
        again = fetcher.retrieve_work()
        assert _label(again) == "back"
        again.acknowledge()
        fetcher.flush_acks()
        fetcher.quiet()

    def test_an_abandoned_job_comes_back(self, redis: Any, make_fetcher: Callable[..., Any]) -> None:
        fetcher = make_fetcher("default")
        self.push(redis, "default", "lost")
        uow = fetcher.retrieve_work()
        fetcher.abandon(uow)
        deadline = time.monotonic() + POLL_MARGIN
        again = None
        while again is None and time.monotonic() < deadline:
            again = fetcher.retrieve_work()
        assert again is not None, "an abandoned job must be fetched again"
        assert _label(again) == "lost"
        again.acknowledge()
        fetcher.flush_acks()
        assert _everywhere(redis) == []
        fetcher.quiet()

    def test_shutdown_gives_back_everything_unacknowledged(self, redis: Any, make_fetcher: Callable[..., Any]) -> None:
        fetcher = make_fetcher("default", concurrency=3)
        self.push(redis, "default", "done", "running", "fresh")
        done = fetcher.retrieve_work()
        running = fetcher.retrieve_work()
        done.acknowledge()
        assert _label(running) == "running"
        fetcher.quiet()
        fetcher.requeue_all()
        remaining = sorted(json.loads(job)["args"][0] for job in redis.lrange("queue:default", 0, -1))
        assert remaining == ["fresh", "running"]
        assert len(_everywhere(redis)) == 2  # nothing left in a private list

    def test_a_quieted_fetcher_claims_nothing(self, redis: Any, make_fetcher: Callable[..., Any]) -> None:
        fetcher = make_fetcher("default")
        fetcher.quiet()
        self.push(redis, "default", "after")
        started = time.monotonic()
        assert fetcher.retrieve_work() is None
        assert time.monotonic() - started < POLL_MARGIN
        assert redis.llen("queue:default") == 1

    def test_every_queue_is_served_and_paused_ones_skipped(self, redis: Any, make_fetcher: Callable[..., Any]) -> None:
        fetcher = make_fetcher("first", "second")
        redis.sadd("paused", "first")
        self.push(redis, "first", "held")
        self.push(redis, "second", "served")
        uow = fetcher.retrieve_work()
        assert (uow.queue, _label(uow)) == ("second", "served")
        uow.acknowledge()
        fetcher.flush_acks()
        assert redis.llen("queue:first") == 1
        fetcher.quiet()

    def test_prefetch_is_settable(self, make_fetcher: Callable[..., Any]) -> None:
        fetcher = make_fetcher("default")
        fetcher.prefetch = lambda: 0
        assert fetcher.prefetch() == 0
        fetcher.quiet()
