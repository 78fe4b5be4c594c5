"""Limiters through lost replies, for real: a proxy lets the server apply an
acquire (or a settlement, or a count) and then resets the client's connection
before the reply reaches it, and the pool sends the call again. The call sent
again must be recognised: a charge counted twice lets fewer calls through
than the limit, and a concurrent slot taken twice leaks until its lease
expires."""

from __future__ import annotations

import logging

import pytest

from tests.limiter.conftest import CAPACITY, MAKERS, call_kwargs
from wurk.testing.faults import FaultProxy, Matcher
from wurk_limiter import Limiter, OverLimit

LOGGER = "tests.limiter.lost_replies"

#: The script each type's acquire calls.
ACQUIRE = {
    "concurrent": "limiter.concurrent_acquire",
    "bucket": "limiter.bucket_acquire",
    "window": "limiter.window_acquire",
    "leaky": "limiter.leaky_acquire",
    "points": "limiter.points",
}


def first_reply_lost(config, script: str, *also: bytes) -> Matcher:
    """Every call of ``script`` (with each of ``also`` among its arguments)
    loses its first reply; the call sent again gets through."""
    evalsha = FaultProxy.command(b"EVALSHA", config.scripts[script].sha.encode())

    def matches(args: list[bytes]) -> bool:
        return evalsha(args) and all(arg in args for arg in also)

    return FaultProxy.first_sending(matches)


def test_an_admission_whose_reply_is_lost_is_charged_once(lossy_config, fault_proxy, kind):
    limiter = MAKERS[kind](f"lost-{kind}", wait_timeout=0)
    fault_proxy.lose_reply(first_reply_lost(lossy_config, ACQUIRE[kind]))
    with limiter.within_limit(**call_kwargs(kind)):
        pass
    assert len(fault_proxy.lost) == 1
    # A concurrent slot is given back at the end of the block; the others
    # keep one charge, not two, so the limit still admits its capacity.
    charged = 0 if kind == "concurrent" else 1
    assert limiter.status()["used"] == pytest.approx(charged, abs=0.01)
    for _ in range(CAPACITY - charged):
        with limiter.within_limit(**call_kwargs(kind)):
            pass


def test_a_concurrent_slot_whose_reply_is_lost_is_held_once_and_given_back(lossy_config, fault_proxy, redis):
    """Before: the acquire sent again took a second slot under a new token;
    the block gave that one back, and the first stayed held until its lease
    ran out, one slot fewer for everyone."""
    limiter = Limiter.concurrent("lost-slot", 1, wait_timeout=0, lock_timeout=600)
    fault_proxy.lose_reply(first_reply_lost(lossy_config, ACQUIRE["concurrent"]))
    with limiter.within_limit():
        assert redis.zcard("lmtr-cs:lost-slot") == 1
    assert redis.zcard("lmtr-cs:lost-slot") == 0
    status = limiter.status()
    assert (status["immediate"], status["held"]) == (1, 1)
    with limiter.within_limit():  # the only slot is free again
        pass


def test_a_points_settlement_whose_reply_is_lost_is_settled_once(lossy_config, fault_proxy):
    """Before: a refund sent again was refunded twice, letting more through than the limit."""
    limiter = Limiter.points("lost-points", 10, 0.0001)
    fault_proxy.lose_reply(first_reply_lost(lossy_config, "limiter.points", b"settle"))
    with limiter.within_limit(estimate=6) as handle:
        handle.points_used(2)  # refunds 4
    assert len(fault_proxy.lost) == 1
    assert limiter.status()["used"] == pytest.approx(2, abs=0.01)


def test_an_overage_count_whose_reply_is_lost_is_not_counted_twice(lossy_config, fault_proxy, caplog):
    lossy_config.logger = logging.getLogger(LOGGER)
    caplog.set_level(logging.WARNING, logger=LOGGER)
    limiter = Limiter.concurrent("lost-overage", 1, wait_timeout=0)
    with limiter.within_limit():
        fault_proxy.lose_reply(FaultProxy.command(b"EXEC"))  # the count's transaction
        with pytest.raises(OverLimit), limiter.within_limit():
            pass
    assert len(fault_proxy.lost) == 1
    assert limiter.status()["overages"] == 1
    assert [message for message in caplog.messages if "lost-overage" in message] == [
        "limiter lost-overage: the reply to counting an overage was lost; it may not have been counted"
    ]
