"""Lost replies, for real: a proxy lets the server apply a write and then
resets the client's connection before the reply reaches it, and the pool
sends the write again. Each write must be recognised or not repeated."""

from __future__ import annotations

import json

import pytest

import wurk
from wurk.errors import LostReplyError
from wurk.scheduled import Enq
from wurk.testing.faults import FaultProxy, Matcher


class Mail(wurk.Job, queue="mail"):
    def perform(self, n):
        pass


def once_each(config: wurk.Config, script: str) -> Matcher:
    """Every call of ``script`` loses its first reply; the call sent again gets through."""
    return FaultProxy.first_sending(FaultProxy.command(b"EVALSHA", config.scripts[script].sha.encode()))


def queued(redis, queue: str = "mail") -> list[dict]:
    return [json.loads(raw) for raw in reversed(redis.lrange(f"queue:{queue}", 0, -1))]


def test_a_write_that_must_not_repeat_raises_once_its_reply_is_lost(lossy_config, fault_proxy, redis):
    fault_proxy.lose_reply(FaultProxy.command(b"INCRBY", b"counter"))
    with pytest.raises(LostReplyError, match="may or may not have been applied"):
        lossy_config.redis_pool.execute(lambda conn: conn.incr("counter"), once=True)
    assert redis.get("counter") == b"1"  # applied, and not sent again
    assert len(fault_proxy.lost) == 1


def test_a_read_is_sent_again_after_a_lost_reply(lossy_config, fault_proxy, redis):
    redis.set("k", "v")
    fault_proxy.lose_reply(FaultProxy.command(b"GET", b"k"), times=2)
    assert lossy_config.redis_pool.execute(lambda conn: conn.get("k")) == b"v"
    assert len(fault_proxy.lost) == 2


def test_a_refused_connection_is_retried_even_for_a_write_that_must_not_repeat(lossy_config, fault_proxy, redis):
    """Nothing was sent when the connection was cut before the command: safe to retry."""
    assert lossy_config.redis_pool.execute(lambda conn: conn.incr("counter"), once=True) == 1
    fault_proxy.cut()  # the pooled connection is dead; the next command finds out on reading
    lossy_config.redis_pool.connection_pool.disconnect()
    assert lossy_config.redis_pool.execute(lambda conn: conn.incr("counter"), once=True) == 2


def test_pushes_whose_replies_are_lost_are_pushed_once(lossy_config, fault_proxy, redis):
    fault_proxy.lose_reply(once_each(lossy_config, "core.push"), times=3)
    jids = [Mail.perform_async(n) for n in range(3)]
    assert len(fault_proxy.lost) == 3
    assert [job["jid"] for job in queued(redis)] == jids


def test_a_bulk_push_whose_reply_is_lost_is_pushed_once(lossy_config, fault_proxy, redis):
    fault_proxy.lose_reply(once_each(lossy_config, "core.push"))
    jids = wurk.Client().push_bulk({"class": Mail, "args": [[n] for n in range(2500)]})
    assert len(fault_proxy.lost) == 1
    assert [job["jid"] for job in queued(redis)] == jids
    assert redis.smembers("queues") == {b"mail"}


def test_a_scheduled_push_whose_reply_is_lost_is_scheduled_once(lossy_config, fault_proxy, redis):
    fault_proxy.lose_reply(once_each(lossy_config, "core.push"))
    jid = Mail.perform_in(3600, 1)
    assert [json.loads(member)["jid"] for member in redis.zrange("schedule", 0, -1)] == [jid]


def test_the_scheduler_loses_no_job_when_its_pops_replies_are_lost(lossy_config, fault_proxy, redis):
    """Before fencing, each re-sent pop took the next job and the first was gone."""
    jids = [Mail.perform_in(3600, n) for n in range(5)]
    redis.zadd("schedule", dict.fromkeys(redis.zrange("schedule", 0, -1), 1.0), xx=True)  # all due now
    fault_proxy.lose_reply(once_each(lossy_config, "core.zpopbyscore"), times=3)
    fault_proxy.lose_reply(once_each(lossy_config, "core.push"), times=2)
    moved = Enq(lossy_config).enqueue_jobs()
    assert moved == 5
    assert len(fault_proxy.lost) == 5
    assert sorted(job["jid"] for job in queued(redis)) == sorted(jids)
    assert redis.zcard("schedule") == 0
