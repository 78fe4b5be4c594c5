"""Lost replies, for real: a proxy lets the server apply a write and then
resets the client's connection before the reply reaches it, and the pool
sends the write again. Each write must be recognised or not repeated."""

from __future__ import annotations

import json
import logging

import pytest

import wurk
from tests.helpers import first_reply_lost
from wurk.errors import LostReplyError
from wurk.server.scheduled import Enq
from wurk.testing.faults import FaultProxy


class Mail(wurk.Job, queue="mail"):
    def perform(self, n):
        pass


class Recorder(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


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
    fault_proxy.lose_reply(FaultProxy.first_sending(FaultProxy.push(lossy_config)), times=3)
    jids = [Mail.perform_async(n) for n in range(3)]
    assert len(fault_proxy.lost) == 3
    assert [job["jid"] for job in queued(redis)] == jids


def test_a_bulk_push_whose_reply_is_lost_is_pushed_once(lossy_config, fault_proxy, redis):
    fault_proxy.lose_reply(FaultProxy.first_sending(FaultProxy.push(lossy_config)))
    jids = wurk.Client().push_bulk({"class": Mail, "args": [[n] for n in range(2500)]})
    assert len(fault_proxy.lost) == 1
    assert [job["jid"] for job in queued(redis)] == jids
    assert redis.smembers("queues") == {b"mail"}


def test_a_scheduled_push_whose_reply_is_lost_is_scheduled_once(lossy_config, fault_proxy, redis):
    fault_proxy.lose_reply(FaultProxy.first_sending(FaultProxy.push(lossy_config)))
    jid = Mail.perform_in(3600, 1)
    assert [json.loads(member)["jid"] for member in redis.zrange("schedule", 0, -1)] == [jid]


def test_the_scheduler_loses_no_job_when_its_pops_replies_are_lost(lossy_config, fault_proxy, redis):
    """Before fencing, each re-sent pop took the next job and the first was gone."""
    jids = [Mail.perform_in(3600, n) for n in range(5)]
    redis.zadd("schedule", dict.fromkeys(redis.zrange("schedule", 0, -1), 1.0), xx=True)  # all due now
    fault_proxy.lose_reply(first_reply_lost(lossy_config, "core.zpopbyscore"), times=3)
    fault_proxy.lose_reply(FaultProxy.first_sending(FaultProxy.push(lossy_config)), times=2)
    moved = Enq(lossy_config).enqueue_jobs()
    assert moved == 5
    assert len(fault_proxy.lost) == 5
    assert sorted(job["jid"] for job in queued(redis)) == sorted(jids)
    assert redis.zcard("schedule") == 0


def test_a_signal_is_not_dropped_when_its_pops_reply_is_lost(lossy_config, fault_proxy, redis):
    from wurk.server.heartbeat import Heartbeat
    from wurk.server.launcher import Launcher

    launcher = Launcher(lossy_config)
    received: list[str] = []
    launcher.runtime.on_signal = received.append  # type: ignore[method-assign]
    heartbeat = Heartbeat(launcher.runtime)
    heartbeat.beat()
    signals = f"{heartbeat.identity}-signals"
    redis.lpush(signals, "TSTP", "TTIN")  # TSTP is the older: taken first
    fault_proxy.lose_reply(first_reply_lost(lossy_config, "core.signal_pop"), times=2)
    heartbeat.beat()
    heartbeat.beat()
    assert len(fault_proxy.lost) == 2
    assert received == ["TSTP", "TTIN"]
    assert redis.llen(signals) == 0


def test_a_stats_flush_whose_reply_is_lost_counts_once(lossy_config, fault_proxy, redis):
    from wurk.server.heartbeat import Heartbeat
    from wurk.server.launcher import Launcher

    heartbeat = Heartbeat(Launcher(lossy_config).runtime)
    for _ in range(7):
        heartbeat.runtime.stats.count()
    fault_proxy.lose_reply(FaultProxy.command(b"INCRBY", b"stat:processed"))
    warnings = Recorder()
    lossy_config.logger.addHandler(warnings)
    try:
        heartbeat.flush_stats()
        heartbeat.flush_stats()  # nothing put back to count twice
    finally:
        lossy_config.logger.removeHandler(warnings)
    assert redis.get("stat:processed") == b"7"
    assert any("reply to a stats flush was lost" in line for line in warnings.lines)


def test_a_leader_recognises_the_lock_it_set_when_the_reply_was_lost(lossy_config, fault_proxy, redis):
    from wurk.server.leader import Leader

    leader = Leader(lossy_config, "host:1:aaaaaaaaaaaa")
    fault_proxy.lose_reply(FaultProxy.command(b"SET", b"dear-leader"))
    assert leader.campaign()
    assert leader.leads()
    assert redis.get("dear-leader") == b"host:1:aaaaaaaaaaaa"
    leader.finish()


def test_retry_all_loses_no_entry_when_its_pops_replies_are_lost(lossy_config, fault_proxy, redis):
    from wurk.api import RetrySet

    members = {
        json.dumps(
            {
                "class": "tests.core.test_lost_replies.Mail",
                "args": [n],
                "queue": "mail",
                "jid": f"j{n}",
                "retry": True,
                "retry_count": 1,
            }
        ): float(n)
        for n in range(4)
    }
    redis.zadd("retry", members)
    fault_proxy.lose_reply(first_reply_lost(lossy_config, "core.zpopbyscore"), times=4)
    assert RetrySet(config=lossy_config).retry_all() == 4
    assert sorted(job["jid"] for job in queued(redis)) == ["j0", "j1", "j2", "j3"]
    assert redis.zcard("retry") == 0


def test_retrying_one_entry_whose_removal_lost_its_reply_still_enqueues_it(lossy_config, fault_proxy, redis):
    from wurk.api import RetrySet

    member = json.dumps({"class": "tests.core.test_lost_replies.Mail", "args": [1], "queue": "mail", "jid": "one"})
    redis.zadd("retry", {member: 5.0})
    [entry] = list(RetrySet(config=lossy_config))
    fault_proxy.lose_reply(FaultProxy.command(b"ZREM", b"retry"))
    assert entry.retry() is not None
    assert len(fault_proxy.lost) == 1
    assert [job["jid"] for job in queued(redis)] == ["one"]
    assert redis.zcard("retry") == 0


def test_the_default_scheduler_dead_sets_a_member_the_client_refuses(config, redis):
    """Popped, then refused by the client: it used to be logged and lost."""
    good = Mail.perform_in(3600, 1)
    bad = b'{"class":"tests.core.test_lost_replies.Mail","args":[1],"queue":"mail","jid":7}'
    redis.zadd("schedule", {bad: 1.0, b"\xff not utf-8": 2.0})
    redis.zadd("schedule", dict.fromkeys(redis.zrange("schedule", 0, -1), 1.0), xx=True)
    assert Enq(config).enqueue_jobs() == 3
    assert [job["jid"] for job in queued(redis)] == [good]
    assert set(redis.zrange("dead", 0, -1)) == {bad, b"\xff not utf-8"}
    assert redis.zcard("schedule") == 0


def test_the_default_scheduler_puts_back_a_member_it_could_not_push(lossy_config, fault_proxy, redis):
    """Every attempt at the push cut before it reaches Redis: the member goes
    back to its set instead of being lost, and is promoted on the next pass."""
    jid = Mail.perform_in(3600, 1)
    redis.zadd("schedule", dict.fromkeys(redis.zrange("schedule", 0, -1), 1.0), xx=True)
    fault_proxy.refuse(FaultProxy.push_start(lossy_config), times=3)
    Enq(lossy_config).enqueue_jobs()
    assert len(fault_proxy.refused) == 3
    assert redis.llen("queue:mail") == 0
    assert [json.loads(member)["jid"] for member in redis.zrange("schedule", 0, -1)] == [jid]
    assert Enq(lossy_config).enqueue_jobs() == 1
    assert [job["jid"] for job in queued(redis)] == [jid]


@pytest.mark.parametrize("fault", ["lose_reply", "refuse"])
def test_the_outage_buffer_replays_a_push_that_gave_up_only_if_it_never_arrived(
    lossy_config, fault_proxy, redis, fault
):
    """A push lost its reply (applied) and could not look itself up, or
    never arrived (refused every time): it gives up and its job is buffered;
    the replay looks the push up by its fence and writes it only if it did
    not arrive."""
    lossy_config.reliable_push()
    if fault == "lose_reply":
        fault_proxy.lose_reply(FaultProxy.push(lossy_config))
        fault_proxy.refuse(lambda args: args[0].upper() == b"GET" and args[1].startswith(b"wurk:fence:"), times=3)
    else:
        fault_proxy.refuse(FaultProxy.push_start(lossy_config), times=3)
    first = Mail.perform_async(1)
    assert len(lossy_config.lookup("outage_buffer")) == 1
    second = Mail.perform_async(2)  # replays the buffer first
    assert len(lossy_config.lookup("outage_buffer")) == 0
    assert [job["jid"] for job in queued(redis)] == [first, second]
