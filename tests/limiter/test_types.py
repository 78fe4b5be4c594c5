"""What each type does beyond the contract: concurrent slots and counters,
bucket and window charges, leaky draining, points settling, unlimited."""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from contextlib import ExitStack

import pytest

from tests.helpers import wait_for
from wurk.server.loop import LoopRunner
from wurk_limiter import Limiter, OverLimit


def test_concurrent_slot_is_released_when_the_block_raises(config, redis):
    limiter = Limiter.concurrent("db", 1, wait_timeout=0)
    with pytest.raises(KeyError), limiter.within_limit():
        raise KeyError("boom")
    with limiter.within_limit():
        assert redis.zcard("lmtr-cs:db") == 1
    assert redis.zcard("lmtr-cs:db") == 0
    assert limiter.status()["held"] == 2


def test_concurrent_waiter_gets_the_slot_when_it_frees(config):
    limiter = Limiter.concurrent("db", 1, wait_timeout=10)
    taken, release = threading.Event(), threading.Event()

    def holder() -> None:
        with limiter.within_limit():
            taken.set()
            release.wait(10)

    thread = threading.Thread(target=holder)
    thread.start()
    taken.wait(10)
    threading.Timer(0.3, release.set).start()
    with limiter.within_limit() as handle:
        assert handle.admitted_at > 0
    thread.join(10)
    status = limiter.status()
    assert (status["immediate"], status["waited"], status["held"]) == (1, 1, 2)
    assert status["wait_time"] > 0
    assert status["held_time"] > 0


def test_concurrent_timeout_counts_an_overage(config):
    limiter = Limiter.concurrent("db", 1, wait_timeout=0)
    with limiter.within_limit(), pytest.raises(OverLimit):
        limiter.within_limit().__enter__()
    assert limiter.status()["overages"] == 1


def test_concurrent_slot_never_given_back_is_reclaimed_after_lock_timeout(config, redis):
    # A block entered and never left; a holder really killed in its block is
    # tests/limiter/test_kills.py.
    limiter = Limiter.concurrent("db", 1, wait_timeout=0, lock_timeout=0.3)
    limiter.within_limit().__enter__()  # never exits
    with pytest.raises(OverLimit):
        limiter.within_limit().__enter__()
    wait_for(lambda: limiter.status()["used"] == 0, timeout=10)
    with limiter.within_limit():
        pass
    assert limiter.status()["reclaimed"] == 1


def test_policy_ignore_skips_the_block_and_returns_none(config):
    limiter = Limiter.concurrent("optional", 1, wait_timeout=0, policy="ignore")
    ran: list[str] = []
    assert limiter.within_limit(lambda: ran.append("free") or "ok") == "ok"
    with pytest.raises(TypeError, match="policy='ignore'"):
        limiter.within_limit()
    blocker = Limiter.concurrent("optional", 1, wait_timeout=0)
    with blocker.within_limit():
        assert limiter.within_limit(lambda: ran.append("full")) is None
    assert ran == ["free"]


def test_a_blocking_wait_on_the_job_loop_is_refused_with_the_async_form_named(config):
    waiting = Limiter.concurrent("pool", 1, wait_timeout=5)
    at_once = Limiter.concurrent("pool-now", 1, wait_timeout=0)
    ran = []

    async def job() -> None:
        with pytest.raises(RuntimeError, match=r"use `async with limiter.within_limit\(\):`"), waiting.within_limit():
            ran.append("blocked")
        with pytest.raises(RuntimeError, match=r"await limiter.within_limit\(async_fn\)"):
            waiting.within_limit(lambda: ran.append("blocked"))
        with at_once.within_limit():  # no wait, no stall: allowed
            ran.append("at once")
        async with waiting.within_limit():
            ran.append("awaited")

    runner = LoopRunner()  # the loop a worker runs its async jobs on
    try:
        runner.run(job())
    finally:
        runner.stop()
    assert ran == ["at once", "awaited"]
    with waiting.within_limit():  # outside a loop the blocking form is the one to use
        ran.append("thread")
    assert ran[-1] == "thread"


def test_a_blocking_wait_under_some_other_loop_is_the_callers_to_make(config):
    """A thread that runs a loop of its own (a script's ``asyncio.run``, a
    synchronous browser driver) stalls only itself: not refused."""
    waiting = Limiter.concurrent("pool", 1, wait_timeout=5)
    ran = []

    async def script() -> None:
        with waiting.within_limit():
            ran.append("with")
        waiting.within_limit(lambda: ran.append("callable"))

    asyncio.run(script())
    assert ran == ["with", "callable"]


def test_async_wait_leaves_the_event_loop_free(config):
    limiter = Limiter.concurrent("db", 1, wait_timeout=10)
    taken, release = threading.Event(), threading.Event()

    def holder() -> None:
        with limiter.within_limit():
            taken.set()
            release.wait(10)

    thread = threading.Thread(target=holder)
    thread.start()
    taken.wait(10)

    async def main() -> int:
        ticks = 0

        async def block() -> None:
            await asyncio.sleep(0)

        waiter = asyncio.ensure_future(limiter.within_limit(block))
        while ticks < 5:  # the loop runs while the waiter waits
            await asyncio.sleep(0.02)
            ticks += 1
        assert not waiter.done()
        release.set()
        await waiter
        return ticks

    assert asyncio.run(main()) == 5
    thread.join(10)


@pytest.mark.parametrize(
    "build",
    [lambda: Limiter.bucket("m", 10, "hour", wait_timeout=0), lambda: Limiter.window("m", 10, 3600, wait_timeout=0)],
)
def test_used_charges_the_whole_amount_or_nothing(config, build):
    limiter = build()
    with limiter.within_limit(used=7):
        pass
    with pytest.raises(OverLimit), limiter.within_limit(used=4):
        pass
    assert limiter.size == 7
    with limiter.within_limit(used=3):
        pass
    assert limiter.size == 10


def test_bucket_resets_at_the_boundary(config, redis):
    limiter = Limiter.bucket("per-second", 3, "second", wait_timeout=5)
    admitted = []
    for _ in range(8):
        with limiter.within_limit() as handle:
            admitted.append(handle.admitted_at)
    per_second = Counter(int(at) for at in admitted)
    assert max(per_second.values()) <= 3
    assert len(per_second) >= 3  # 8 calls at 3 a second span three periods at least
    for epoch, count in per_second.items():
        assert int(redis.get(f"lmtr-b:per-second:{epoch}")) == count


def test_window_waits_for_the_oldest_entry_to_leave(config):
    limiter = Limiter.window("w", 2, 1, wait_timeout=5)
    admitted = []
    for _ in range(5):
        with limiter.within_limit() as handle:
            admitted.append(handle.admitted_at)
    for index, at in enumerate(admitted):
        inside = [other for other in admitted if at - 1 < other <= at]
        assert len(inside) <= 2, (index, admitted)


def test_leaky_drains_at_its_rate(config):
    limiter = Limiter.leaky("sms", 4, 2, wait_timeout=5)  # 2 drops a second
    admitted = []
    for _ in range(8):
        with limiter.within_limit() as handle:
            admitted.append(handle.admitted_at)
    start = admitted[0]
    for index, at in enumerate(admitted[4:], start=4):
        # index + 1 drops in a bucket of 4 means index - 3 of them drained.
        assert at - start >= (index - 3) / 2 - 0.001, admitted


def test_points_refund_charge_and_clamp(config):
    limiter = Limiter.points("llm", 100, 0)  # no refill: every change is a settlement
    with limiter.within_limit(estimate=60) as first:
        with pytest.raises(OverLimit), limiter.within_limit(estimate=60):
            pytest.fail("40 points cannot pay 60")
        first.points_used(10)  # refunds 50
    assert limiter.size == pytest.approx(10)
    with limiter.within_limit(estimate=60) as second:
        second.points_used(200)  # charges 140 more than it has: the balance stops at 0
    assert limiter.size == pytest.approx(100)
    limiter.reset()
    with limiter.within_limit(estimate=10) as third:
        third.points_used(0)
        third.points_used(0)  # correcting again refunds nothing twice
    assert limiter.size == pytest.approx(0)


def test_points_over_its_cap_is_refused_at_once(config):
    limiter = Limiter.points("llm", 5, 1000)
    with pytest.raises(OverLimit), limiter.within_limit(estimate=6):
        pass
    assert limiter.status()["reset_at"] is None  # nothing was spent


def test_unlimited_accepts_anything_and_touches_no_redis(config, redis):
    limiter = Limiter.unlimited("whatever", 3, wait_timeout=9, anything=True)
    with limiter.within_limit(used=5) as handle:
        handle.points_used(1_000)
    assert limiter.within_limit(lambda handle: handle.charged, estimate=5) == 0
    assert limiter.within_limit(lambda: "ran") == "ran"

    async def main() -> None:
        async with limiter.within_limit(estimate=3):
            pass

    asyncio.run(main())
    assert limiter.status()["available"] is True
    assert redis.keys("*") == []


def test_points_used_is_only_for_points(config):
    with Limiter.window("w", 1, 1).within_limit() as handle, pytest.raises(TypeError, match="points_used"):
        handle.points_used(1)


def test_many_threads_never_exceed_a_bucket(config, redis):
    limiter = Limiter.bucket("burst", 25, "hour", wait_timeout=0)
    admitted: list[int] = []

    def worker() -> None:
        for _ in range(10):
            try:
                with limiter.within_limit():
                    admitted.append(1)
            except OverLimit:
                pass

    with ExitStack():
        threads = [threading.Thread(target=worker) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
    assert len(admitted) == 25
