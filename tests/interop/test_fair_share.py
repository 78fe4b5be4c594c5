"""A Python worker sharing a queue with a Ruby Sidekiq gets its share of the jobs.

The Python worker serves ``first`` then ``shared``; the Ruby Sidekiq serves
``shared`` only, and both sit idle, blocked waiting for work. Jobs pushed one
at a time to ``shared`` must then reach the Python worker too: an idle worker
waits on every queue it serves, not only on its first one. Run with::

    WURK_INTEROP_CHROOT=/srv/forky .venv/bin/python -m pytest -m interop tests/interop/test_fair_share.py
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.helpers import wait_for
from tests.interop.conftest import Interop

pytestmark = [pytest.mark.interop, pytest.mark.timeout(240)]

ROUNDS = 3
JOBS_PER_ROUND = 20
# Half each would be fair; a quarter is the floor, so the test does not hang on luck.
FLOOR = 5


def run_one(interop: Interop, label: str) -> str:
    """Push one job to ``shared`` and wait for it; who ran it."""
    jid = interop.client.push({"class": "InteropCount", "queue": "shared", "args": [label, 0]})

    def result() -> dict[str, Any] | None:
        return next((entry for entry in interop.results() if entry["jid"] == jid), None)

    entry = wait_for(result, timeout=30, interval=0.02)
    return entry["runner"]  # type: ignore[index]


def both_waiting(interop: Interop, threads: int) -> bool:
    """The Ruby thread blocked in its ``BRPOP``, and every waiter of the
    Python worker blocked in its ``BLMOVE``: two per thread when all are idle
    (one per queue and rank, up to twice the concurrency)."""
    blocked = [entry["cmd"] for entry in interop.redis.client_list() if "b" in entry["flags"]]
    return blocked.count("brpop") == 1 and blocked.count("blmove") == 2 * threads


@pytest.mark.parametrize("threads", [1, 2], ids=["python-c1", "python-c2"])
def test_a_python_worker_gets_a_fair_share_of_its_second_queue(interop: Interop, threads: int) -> None:
    # One Ruby thread: one blocked BRPOP, against however many waiters the Python worker keeps.
    interop.start_python_worker(concurrency=threads, queues=("first", "shared"), tag="py-fair")
    interop.start_ruby_worker(concurrency=1, queues=("shared",), tag="ruby-fair")
    for round_number in range(ROUNDS):
        runners = []
        for n in range(JOBS_PER_ROUND):
            # Both idle and blocked: whoever ran the last job is waiting again.
            wait_for(lambda: both_waiting(interop, threads), timeout=30, interval=0.02)
            runners.append(run_one(interop, f"round {round_number} job {n}"))
        assert runners.count("python") >= FLOOR, f"round {round_number}: {runners}"
    assert interop.redis.llen("queue:shared") == 0
    assert set(interop.redis.hvals("interop:counts")) == {"1"}  # each job ran once
