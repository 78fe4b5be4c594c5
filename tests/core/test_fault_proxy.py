"""The fault proxy's bookkeeping for long runs: when each reply was lost, and
disarming what has not struck yet (``wurk.testing.faults``, used by the chaos
driver in bench/chaos to date its lost-reply events)."""

from __future__ import annotations

import time

import pytest
import redis as redis_py

from wurk.testing.faults import FaultProxy


def test_each_lost_reply_is_dated_when_its_command_was_sent(fault_proxy, redis):
    client = redis_py.Redis.from_url(fault_proxy.url())
    fault_proxy.lose_reply(FaultProxy.first_sending(FaultProxy.command(b"RPUSH", b"log")))
    before = time.time()
    with pytest.raises(redis_py.ConnectionError):
        client.rpush("log", "a")
    after = time.time()
    assert redis.lrange("log", 0, -1) == [b"a"]  # applied; only the reply was lost
    assert fault_proxy.lost == [[b"RPUSH", b"log", b"a"]]
    assert len(fault_proxy.lost_at) == 1
    assert before <= fault_proxy.lost_at[0] <= after
    client.close()


def test_disarm_drops_the_faults_that_have_not_struck(fault_proxy, redis):
    client = redis_py.Redis.from_url(fault_proxy.url())
    fault_proxy.lose_reply(FaultProxy.command(b"INCR", b"never-sent"), times=3)
    fault_proxy.lose_reply(FaultProxy.command(b"GET"))
    assert fault_proxy.armed() == 4
    assert fault_proxy.disarm() == 4
    assert fault_proxy.armed() == 0
    redis.set("k", "v")
    assert client.get("k") == b"v"  # no reply lost any more
    assert fault_proxy.lost == []
    assert fault_proxy.lost_at == []
    client.close()
