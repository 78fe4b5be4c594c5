"""Reliable fetch, the reaper and the scheduler's pieces, each against a real server."""

from __future__ import annotations

import collections
import json
import os
import subprocess
import sys
import threading
import time

import pytest

from tests.helpers import wait_for
from wurk.server.fetch import ReliableFetcher
from wurk.server.identity import ProcessIdentity, parse_private_queue
from wurk.server.reaper import Reaper
from wurk.server.scheduled import Poller, cleanup_processes


def push(redis, queue, *jobs):
    """LPUSH jobs named by jid, in order: the first is the oldest, fetched first."""
    for job in jobs:
        redis.lpush(f"queue:{queue}", json.dumps({"jid": job, "queue": queue, "class": "X", "args": []}))


def fetched(fetcher):
    """The next job, acknowledged at once (as a processor would after running it)."""
    uow = fetcher.retrieve_work()
    books(fetcher)
    uow.acknowledge()
    books(fetcher)
    return uow


def books(fetcher):
    """The fetcher's claim ledger adds up: the bound holds, and every job it
    claimed is running or waiting in its local buffer."""
    with fetcher.ledger.lock:
        fetcher.ledger.check()


def idle_threads(fetcher, count):
    """``count`` other processor threads are waiting for a job."""
    with fetcher.ledger.lock:
        for _ in range(count):
            fetcher.ledger.thread_idles()


def jid_of(uow):
    return json.loads(uow.job)["jid"]


def test_a_fetched_job_lives_in_the_private_list_until_acknowledged(fetcher_for, redis):
    fetcher = fetcher_for("default")
    push(redis, "default", "one")
    uow = fetcher.retrieve_work()
    assert jid_of(uow) == "one"
    assert uow.private == fetcher.identity.private_queue("default")
    assert parse_private_queue(uow.private)[1:] == (
        fetcher.identity.hostname,
        fetcher.identity.pid,
        fetcher.identity.nonce,
    )
    assert redis.llen("queue:default") == 0
    assert redis.lrange(uow.private, 0, -1) == [uow.job.encode()]
    assert fetcher.ledger.running == {uow}
    books(fetcher)
    uow.acknowledge()
    assert redis.llen(uow.private) == 1  # the LREM waits for the next round trip
    assert fetcher.ledger.held == 1
    books(fetcher)
    fetcher.flush_acks()
    assert redis.llen(uow.private) == 0
    assert (fetcher.ledger.held, fetcher.ledger.outstanding, fetcher.ledger.running) == (0, {}, set())
    books(fetcher)


def test_strict_order_takes_oldest_first_and_skips_paused_queues(fetcher_for, redis):
    fetcher = fetcher_for("critical", "default")
    push(redis, "default", "d1", "d2")
    push(redis, "critical", "c1")
    assert [jid_of(fetched(fetcher)) for _ in range(3)] == ["c1", "d1", "d2"]
    redis.sadd("paused", "critical")
    push(redis, "critical", "c2")
    push(redis, "default", "d3")
    assert jid_of(fetched(fetcher)) == "d3"
    time.sleep(1.1)  # the paused cache refreshes after a second
    assert fetcher.retrieve_work() is None  # critical is paused, default is empty
    assert redis.llen("queue:critical") == 1


def test_weighted_and_random_orders(fetcher_for):
    fetcher = fetcher_for("a,6", "b,3", "c,1")
    firsts = collections.Counter(fetcher.queue_order()[0] for _ in range(3000))
    assert firsts["a"] > firsts["b"] > firsts["c"] > 0
    assert sorted(fetcher.queue_order()) == ["a", "b", "c"]
    random_fetcher = fetcher_for("a,1", "b,1")
    assert random_fetcher._mode == "random"
    assert {tuple(random_fetcher.queue_order()) for _ in range(200)} == {("a", "b"), ("b", "a")}


def test_one_round_trip_claims_for_every_waiting_thread(fetcher_for, redis):
    fetcher = fetcher_for("default", concurrency=4)
    push(redis, "default", *[f"j{n}" for n in range(6)])
    idle_threads(fetcher, 3)
    first = fetcher.retrieve_work()
    assert jid_of(first) == "j0"
    assert len(fetcher.ledger.local) == 3
    assert redis.llen(fetcher.identity.private_queue("default")) == 4
    books(fetcher)
    assert [jid_of(fetcher.retrieve_work()) for _ in range(3)] == ["j1", "j2", "j3"]
    assert fetcher.ledger.held == 4
    books(fetcher)


def test_requeue_all_gives_everything_back_oldest_at_the_tail(fetcher_for, redis):
    fetcher = fetcher_for("default", concurrency=3)
    push(redis, "default", "a", "b", "c", "fresh")
    running = [fetcher.retrieve_work() for _ in range(3)]
    running[1].acknowledge()  # finished in time
    books(fetcher)
    assert fetcher.requeue_all() == 2
    books(fetcher)
    remaining = [json.loads(item)["jid"] for item in redis.lrange("queue:default", 0, -1)]
    assert remaining == ["fresh", "c", "a"]  # the tail is fetched next: "a" first
    assert redis.llen(fetcher.identity.private_queue("default")) == 0


def test_a_lost_reply_is_reconciled(fetcher_for, redis):
    fetcher = fetcher_for("default")
    push(redis, "default", "kept", "lost")
    kept = fetcher.retrieve_work()
    redis.lmove("queue:default", kept.private, "RIGHT", "LEFT")  # a claim whose reply never arrived
    with fetcher.ledger.lock:
        fetcher.ledger.lost_reply()
    books(fetcher)
    assert fetcher.retrieve_work() is not None  # the reconcile put "lost" back, then fetched it
    assert redis.lrange(kept.private, 0, -1)[-1] == kept.job.encode()
    assert not fetcher.ledger.suspect
    assert fetcher.ledger.held == 2
    books(fetcher)


def blocked_waiters(redis) -> int:
    return sum(1 for entry in redis.client_list() if entry["cmd"] == "blmove" and "b" in entry["flags"])


def test_a_waiters_claim_keeps_the_books_until_its_job_is_given_back(fetcher_for, redis):
    fetcher = fetcher_for("default", "other")  # two queues: waiters block for the threads
    assert fetcher.retrieve_work() is None  # every queue empty: the waiters start
    assert fetcher.ledger.empty
    idle_threads(fetcher, 1)
    with fetcher.ledger.lock:
        fetcher.ledger.wake.notify_all()
    wait_for(lambda: blocked_waiters(redis) == 2, timeout=30)
    assert (fetcher.ledger.held, fetcher.ledger.in_flight) == (2, 2)  # their room is reserved
    books(fetcher)
    push(redis, "default", "waited")
    wait_for(lambda: fetcher.ledger.local, timeout=30)
    books(fetcher)
    uow = fetcher.retrieve_work()  # the idle thread takes it: no claim of its own
    assert jid_of(uow) == "waited"
    assert fetcher.ledger.running == {uow}
    books(fetcher)
    fetcher.quiet()  # a waiter blocked again comes back empty
    for thread in fetcher.waiters.threads:
        thread.join(10)
    books(fetcher)
    assert fetcher.requeue([uow]) == 1
    assert (fetcher.ledger.held, fetcher.ledger.in_flight, fetcher.ledger.outstanding) == (0, 0, {})
    books(fetcher)
    assert [json.loads(job)["jid"] for job in redis.lrange("queue:default", 0, -1)] == ["waited"]


def evalsha_calls(redis):
    return int(redis.info("commandstats").get("cmdstat_evalsha", {}).get("calls", 0))


def test_a_waiters_claim_checks_suspects_in_a_second_round_trip_only_while_there_are_any(fetcher_for, redis):
    fetcher = fetcher_for("default", "other", concurrency=2)
    running = f"super_fetch:running:{fetcher.identity.identity}"
    assert fetcher.retrieve_work() is None  # every queue empty: the waiters start

    def waited(jid):
        idle_threads(fetcher, 1)
        with fetcher.ledger.lock:
            fetcher.ledger.wake.notify_all()
        wait_for(lambda: blocked_waiters(redis) >= 1, timeout=30)
        before = evalsha_calls(redis)
        push(redis, "default", jid)
        wait_for(lambda: fetcher.ledger.local, timeout=30)
        scripts = evalsha_calls(redis) - before
        uow = fetcher.retrieve_work()
        books(fetcher)
        return uow, scripts

    plain, scripts = waited("plain")
    assert (jid_of(plain), plain.suspect, scripts) == ("plain", "", 0)  # BLMOVE alone
    redis.sadd("super_fetch:suspects", "once")  # a crash recovered "once"
    redis.set("super_fetch:recovered:once", 1)
    suspect, scripts = waited("once")
    assert (jid_of(suspect), suspect.suspect, scripts) == ("once", "once", 1)  # checked: core.adopt
    assert redis.smembers(running) == {b"once"}  # marked while it runs
    for uow in (plain, suspect):
        uow.acknowledge()
    fetcher.flush_acks()
    books(fetcher)
    assert redis.smembers(running) == set()


def test_an_abandoned_job_goes_back_at_the_next_claim_and_the_books_follow(fetcher_for, redis):
    fetcher = fetcher_for("default", concurrency=2)
    push(redis, "default", "kept", "dropped")
    kept, dropped = fetcher.retrieve_work(), fetcher.retrieve_work()
    fetcher.abandon(dropped)
    assert fetcher.ledger.suspect
    assert fetcher.ledger.outstanding == {(kept.private, kept.job): kept}
    books(fetcher)
    again = fetcher.retrieve_work()  # the reconcile gives it back first, and it is claimed again
    assert jid_of(again) == "dropped"
    assert not fetcher.ledger.suspect
    assert fetcher.ledger.held == 2
    books(fetcher)
    for uow in (kept, again):
        uow.acknowledge()
    fetcher.flush_acks()
    assert redis.llen(kept.private) == 0
    books(fetcher)


def dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_the_reaper_reclaims_dead_owners_only(config, redis):
    me = ProcessIdentity.current()
    reaper = Reaper(config, me, ["default"])
    dead_local = f"queue:default|{me.hostname}|{dead_pid()}|aaaaaaaaaaaa|0"
    alive_local = f"queue:default|{me.hostname}|{os.getppid()}|bbbbbbbbbbbb|0"
    gone_remote = "queue:default|elsewhere|4242|cccccccccccc|0"
    live_remote = "queue:default|elsewhere|4343|dddddddddddd|0"
    for key, jid in ((dead_local, "d1"), (alive_local, "a1"), (gone_remote, "g1"), (live_remote, "l1")):
        redis.lpush(key, json.dumps({"jid": jid, "class": "X", "args": []}))
    # The pid of a live process that is no worker (a reused pid), and our own
    # pid under another nonce (a container restarted as PID 1): both dead.
    reused_pid = f"queue:default|{me.hostname}|{os.getppid()}|ffffffffffff|0"
    predecessor = f"queue:default|{me.hostname}|{os.getpid()}|999999999999|0"
    for key, jid in ((reused_pid, "r1"), (predecessor, "p1")):
        redis.lpush(key, json.dumps({"jid": jid, "class": "X", "args": []}))
    redis.hset("elsewhere:4343:dddddddddddd", "info", "{}")  # a heartbeat: that owner is alive
    redis.hset(f"{me.hostname}:{os.getppid()}:bbbbbbbbbbbb", "info", "{}")
    redis.lpush(me.private_queue("default"), json.dumps({"jid": "mine"}))
    assert reaper.sweep() == 4
    recovered = sorted(json.loads(item)["jid"] for item in redis.lrange("queue:default", 0, -1))
    assert recovered == ["d1", "g1", "p1", "r1"]
    assert redis.llen(alive_local) == redis.llen(live_remote) == redis.llen(me.private_queue("default")) == 1
    assert redis.get("super_fetch:recovered:d1") == b"1"


def crash(redis, owner, *jobs, running=()):
    """Leave ``jobs`` in the private list of a dead process ``owner`` (host, pid,
    nonce) that was running the suspects ``running``."""
    host, pid, nonce = owner
    for job in jobs:
        redis.lpush(f"queue:default|{host}|{pid}|{nonce}|0", job)
    if running:
        redis.sadd(f"super_fetch:running:{host}:{pid}:{nonce}", *running)


def test_only_jobs_running_at_a_crash_count_towards_a_poison_pill(config, redis):
    reaper = Reaper(config, ProcessIdentity.current(), ["default"])
    bad = json.dumps({"jid": "bad", "class": "X", "args": []})
    neighbour = json.dumps({"jid": "good", "class": "X", "args": []})
    anonymous = json.dumps({"class": "X", "args": []})  # no jid: counted by its bytes
    crash(redis, ("elsewhere", 1, "aaaaaaaaaaaa"), bad, neighbour, anonymous)
    assert reaper.sweep() == 3  # first recoveries: nobody can tell yet, all count
    assert redis.smembers("super_fetch:suspects") >= {b"bad", b"good"}
    redis.delete("queue:default")
    for n in (2, 3):  # twice more, the same two jobs claimed together, "bad" running
        crash(redis, ("elsewhere", n, "aaaaaaaaaaaa"), bad, neighbour, anonymous, running=["bad"])
        reaper.sweep()
        redis.delete("queue:default")
    assert redis.get("super_fetch:recovered:bad") == b"3"
    assert redis.get("super_fetch:recovered:good") == b"1"
    assert [json.loads(m)["jid"] for m in redis.zrange("dead", 0, -1)] == ["bad"]
    assert b"bad" not in redis.smembers("super_fetch:suspects")
    # The anonymous job was never marked running, so it stays at one count.
    anonymous_counters = list(redis.scan_iter("super_fetch:recovered:sha1:*"))
    assert len(anonymous_counters) == 1
    assert redis.get(anonymous_counters[0]) == b"1"


def test_a_jid_less_killer_is_counted_by_its_bytes(config, redis):
    import hashlib

    reaper = Reaper(config, ProcessIdentity.current(), ["default"])
    killer = json.dumps({"class": "X", "args": ["boom"]})
    ident = "sha1:" + hashlib.sha1(killer.encode()).hexdigest()
    for n in (1, 2, 3):
        redis.delete("queue:default")  # a worker took it from the queue, and died of it
        crash(redis, ("elsewhere", n, "bbbbbbbbbbbb"), killer, running=[ident] if n > 1 else [])
        reaper.sweep()
    assert redis.zrange("dead", 0, -1) == [killer.encode()]
    assert redis.llen("queue:default") == 0


def test_suspects_are_marked_while_they_run_and_a_twice_recovered_one_runs_alone(fetcher_for, redis):
    fetcher = fetcher_for("default", concurrency=3)
    push(redis, "default", "plain", "once", "twice")
    redis.sadd("super_fetch:suspects", "once", "twice")
    redis.set("super_fetch:recovered:once", 1)
    redis.set("super_fetch:recovered:twice", 2)
    running = f"super_fetch:running:{fetcher.identity.identity}"
    idle_threads(fetcher, 2)  # claim for three threads at once
    first = fetcher.retrieve_work()
    # "plain" is fetched first (oldest), "once" second and marked; "twice"
    # must run alone, so it goes back to the queue's tail.
    claimed = [first, *fetcher.unstarted()]
    assert [jid_of(u) for u in claimed] == ["plain", "once"]
    assert claimed[1].suspect == "once"
    assert not claimed[1].alone
    assert redis.smembers(running) == {b"once"}
    assert [json.loads(j)["jid"] for j in redis.lrange("queue:default", 0, -1)] == ["twice"]
    books(fetcher)
    for uow in claimed:
        uow.acknowledge()
    fetcher.flush_acks()
    books(fetcher)
    assert redis.smembers(running) == set()
    assert b"once" not in redis.smembers("super_fetch:suspects")
    alone = fetcher.retrieve_work()  # nothing else held: now it may run, alone
    assert (jid_of(alone), alone.alone) == ("twice", True)
    push(redis, "default", "after")
    with fetcher.ledger.lock:
        assert fetcher.ledger.plan(fetcher.prefetch) is None  # no claim while it runs
    assert fetcher.ledger.alone is alone
    books(fetcher)
    alone.acknowledge()
    assert fetcher.ledger.alone is None
    assert jid_of(fetcher.retrieve_work()) == "after"
    books(fetcher)


def test_a_suspect_is_unmarked_and_no_longer_alone_once_it_has_run_its_window(fetcher_for, config, redis):
    config["poison_pill_window"] = 0.5
    fetcher = fetcher_for("default", concurrency=2)
    push(redis, "default", "twice", "after")
    redis.sadd("super_fetch:suspects", "twice")
    redis.set("super_fetch:recovered:twice", 2)
    running = f"super_fetch:running:{fetcher.identity.identity}"
    alone = fetcher.retrieve_work()
    assert (jid_of(alone), alone.alone) == ("twice", True)
    assert redis.smembers(running) == {b"twice"}
    with fetcher.ledger.lock:
        assert fetcher.ledger.plan(fetcher.prefetch) is None  # young: nothing runs beside it
    books(fetcher)
    # Past its window a crash would not be its doing: the mark is off, the others resume.
    wait_for(lambda: not redis.smembers(running) and fetcher.ledger.alone is None, timeout=10)
    beside = fetcher.retrieve_work()
    assert jid_of(beside) == "after"
    assert redis.smembers(running) == set()
    books(fetcher)
    for uow in (alone, beside):
        uow.acknowledge()
    fetcher.flush_acks()
    books(fetcher)
    assert redis.llen(alone.private) == 0
    assert b"twice" not in redis.smembers("super_fetch:suspects")


def test_the_full_sweep_finds_queues_nobody_serves_and_sweeps_are_locked(config, redis):
    me = ProcessIdentity.current()
    reaper = Reaper(config, me, ["default"])
    orphan = f"queue:retired|{me.hostname}|{dead_pid()}|eeeeeeeeeeee|0"
    redis.lpush(orphan, json.dumps({"jid": "o1"}))
    assert reaper.sweep() == 0
    assert reaper.periodic() == 1  # takes both locks on a fresh server
    assert redis.llen("queue:retired") == 1
    assert redis.ttl("super_fetch:reaper") > 0
    assert redis.ttl("super_fetch:reaper:full") > 0
    redis.lpush(orphan, json.dumps({"jid": "o2"}))
    assert Reaper(config, ProcessIdentity.current(), ["retired"]).periodic() == 0  # someone else holds the lock


def test_process_cleanup_drops_lapsed_members_once_a_minute(config, redis):
    redis.sadd("processes", "alive:1:aaaaaaaaaaaa", "lapsed:2:bbbbbbbbbbbb")
    redis.hset("alive:1:aaaaaaaaaaaa", "info", "{}")
    assert cleanup_processes(redis) == 1
    assert redis.smembers("processes") == {b"alive:1:aaaaaaaaaaaa"}
    assert 0 < redis.ttl("process_cleanup") <= 60
    redis.sadd("processes", "lapsed:3:cccccccccccc")
    assert cleanup_processes(redis) == 0  # the lock holds for a minute


def test_poll_intervals_scale_with_the_process_count(config, redis):
    poller = Poller(config)
    assert 10 <= poller.initial_wait() <= 15
    assert 2.5 <= poller.random_interval() < 7.5
    redis.sadd("processes", *[f"p{n}" for n in range(4)])
    assert 10 <= poller.random_interval() < 30
    redis.sadd("processes", *[f"q{n}" for n in range(10)])
    assert 0 <= poller.random_interval() < 140
    config["poll_interval_average"] = 2
    assert 0 <= poller.initial_wait() <= 2
    assert 0 <= poller.random_interval() < 4  # 14 processes: uniform over [0, 2 x average)


@pytest.mark.parametrize("reliable", [False, True])
def test_both_promoters_move_due_jobs_only(config, redis, reliable):
    if reliable:
        config.reliable_scheduler()
    due = {"class": "X", "queue": "soon", "args": [1], "jid": "due", "retry": True}
    later = {"class": "X", "queue": "soon", "args": [2], "jid": "later", "retry": True}
    redis.zadd("schedule", {json.dumps(due): time.time() - 1, json.dumps(later): time.time() + 3600})
    redis.zadd("retry", {json.dumps({**due, "jid": "retried", "retry_count": 1}): time.time() - 5})
    assert Poller(config).enq.enqueue_jobs() == 2
    moved = sorted(json.loads(item)["jid"] for item in redis.lrange("queue:soon", 0, -1))
    assert moved == ["due", "retried"]
    assert [json.loads(m)["jid"] for m in redis.zrange("schedule", 0, -1)] == ["later"]
    assert redis.zcard("retry") == 0


def test_a_long_block_window_widens_the_fetch_pools_read_timeout(config, redis):
    config["fetch_poll_interval"] = 4
    fetcher = ReliableFetcher(config.default_capsule, ProcessIdentity.current())
    conn_kwargs = config.default_capsule.fetch_redis_pool.connection_pool.connection_kwargs
    assert conn_kwargs["socket_timeout"] == 5
    started = time.monotonic()
    try:
        assert fetcher.retrieve_work() is None  # blocked the whole window without a timeout error
        assert time.monotonic() - started >= 3.5
    finally:
        fetcher.requeue_all()  # the waiters end before the pools close under them


def in_thread(function):
    """Run ``function`` in a thread of its own (a processor thread); its
    result or exception lands in the returned dict once the thread ends."""
    outcome: dict[str, object] = {}

    def run():
        try:
            outcome["value"] = function()
        except BaseException as exc:  # handed to the test, which re-raises it
            outcome["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    outcome["thread"] = thread
    return outcome


def long_poll(fetcher, seconds=10.0):
    """A poll interval long enough that an early return is the test's point."""
    fetcher.poll_interval = fetcher.waiters.poll_interval = seconds


def test_with_one_queue_an_idle_thread_blocks_on_it_and_runs_what_it_claims_itself(fetcher_for, redis):
    fetcher = fetcher_for("default")
    long_poll(fetcher)
    push(redis, "default", "first")
    fetched(fetcher)  # a claim that found jobs
    call = in_thread(fetcher.retrieve_work)  # the queue is empty now: this thread blocks on it
    wait_for(lambda: blocked_waiters(redis) == 1, timeout=30)
    assert fetcher.waiters.threads == []  # no waiter stands between the push and the thread
    assert (fetcher.ledger.held, fetcher.ledger.in_flight, fetcher.ledger.blocking) == (1, 1, 1)
    books(fetcher)
    before = evalsha_calls(redis)
    push(redis, "default", "second")
    call["thread"].join(10)
    uow = call["value"]
    assert jid_of(uow) == "second"
    assert evalsha_calls(redis) == before  # no suspects: the BLMOVE's round trip was the whole claim
    assert fetcher.ledger.running == {uow}
    assert not fetcher.ledger.local
    assert (fetcher.ledger.held, fetcher.ledger.in_flight, fetcher.ledger.blocking) == (1, 0, 0)
    assert redis.lrange(uow.private, 0, -1) == [uow.job.encode()]
    books(fetcher)
    uow.acknowledge()
    fetcher.flush_acks()
    assert redis.llen(uow.private) == 0
    books(fetcher)


def test_a_quiet_unblocks_a_thread_blocked_in_its_own_claim_at_once(fetcher_for, redis):
    fetcher = fetcher_for("default")
    long_poll(fetcher)
    call = in_thread(fetcher.retrieve_work)
    wait_for(lambda: blocked_waiters(redis) == 1, timeout=30)
    started = time.monotonic()
    fetcher.quiet()
    call["thread"].join(10)
    assert "error" not in call
    assert call["value"] is None
    assert time.monotonic() - started < 5  # unblocked, not timed out
    assert (fetcher.ledger.held, fetcher.ledger.in_flight, fetcher.ledger.blocking) == (0, 0, 0)
    books(fetcher)
    push(redis, "default", "later")
    time.sleep(0.3)
    assert redis.llen("queue:default") == 1  # nothing claims after a quiet


def test_a_threads_own_claim_of_a_suspect_marks_it_running(fetcher_for, redis):
    fetcher = fetcher_for("default")
    long_poll(fetcher)
    running = f"super_fetch:running:{fetcher.identity.identity}"
    redis.sadd("super_fetch:suspects", "once")  # a crash recovered "once"
    redis.set("super_fetch:recovered:once", 1)
    call = in_thread(fetcher.retrieve_work)
    wait_for(lambda: blocked_waiters(redis) == 1, timeout=30)
    push(redis, "default", "once")
    call["thread"].join(10)
    uow = call["value"]
    assert (jid_of(uow), uow.suspect) == ("once", "once")
    assert redis.smembers(running) == {b"once"}  # marked while it runs
    books(fetcher)
    uow.acknowledge()
    books(fetcher)
    assert redis.smembers(running) == set()


def one_at_a_time(redis, keys, wanted, acks):
    """What ``core.fetch`` does, replayed a command a job on other keys: an
    ``LREM`` per acknowledgement, then an ``LMOVE`` per job claimed from the
    first queue that is not paused, and so on while jobs are wanted. No
    suspect is involved, so no job is marked."""
    paused = {member.decode() for member in redis.smembers(keys[0])}
    for pair, job, _suspect in acks:
        redis.lrem(keys[pair * 2 + 2], 1, job)
    claimed = []
    for pair in range(1, (len(keys) - 3) // 2 + 1):
        public, private = keys[pair * 2 + 1], keys[pair * 2 + 2]
        if public.removeprefix("mirror:").removeprefix("queue:") in paused:
            continue
        while len(claimed) < wanted * 3:
            job = redis.lmove(public, private, "RIGHT", "LEFT")
            if job is None:
                break
            claimed += [pair, job, 0]
    return claimed


def test_the_claim_script_leaves_what_one_command_a_job_would(config, redis):
    """The claim takes a batch in three commands and an acknowledged batch
    leaves in one: the lists and the reply are, case after case, what an
    ``LMOVE`` a job claimed and an ``LREM`` a job acknowledged leave, with
    duplicate payloads, stale acknowledgements, a paused queue, queues that
    run short and acknowledgements of a whole private list or part of one."""
    import random

    rng = random.Random(25)
    payloads = [json.dumps({"jid": f"j{i}", "class": "X", "args": [i % 3]}) for i in range(8)]
    conn = config.redis_pool.client
    for case in range(300):
        redis.flushdb()
        names = ["a", "b"]
        if rng.random() < 0.3:
            redis.sadd("paused", rng.choice(names))
        running = "super_fetch:running:claim-test"  # a name the least-privilege ACL user may touch
        real, mirror = ["paused", "super_fetch:suspects", running], ["paused", "super_fetch:suspects", running]
        for name in names:
            public = [rng.choice(payloads) for _ in range(rng.randrange(0, 9))]
            private = [rng.choice(payloads) for _ in range(rng.choice([0, 1, 2, 5, 8]))]
            for prefix, keys in (("queue:", real), ("mirror:queue:", mirror)):
                keys += [f"{prefix}{name}", f"{prefix}{name}|host|1|nonce|0"]
                if public:
                    redis.rpush(keys[-2], *public)
                if private:
                    redis.rpush(keys[-1], *private)
        pair = rng.choice([1, 2])
        held = [job.decode() for job in redis.lrange(real[pair * 2 + 2], 0, -1)]
        if held and rng.random() < 0.5:
            acks = [(pair, job, "") for job in rng.sample(held, len(held))]  # the whole list
        else:
            acks = [(rng.choice([1, 2]), rng.choice(payloads), "") for _ in range(rng.randrange(0, 6))]
        wanted = rng.randrange(0, 13)
        args = [wanted, "0", 60, len(acks)] + [field for ack in acks for field in ack]
        reply = config.scripts.call("core.fetch", conn, real, args)
        expected = one_at_a_time(redis, mirror, wanted, acks)
        assert [item.decode() if isinstance(item, bytes) else item for item in reply] == [
            item.decode() if isinstance(item, bytes) else item for item in expected
        ], f"case {case}: the reply"
        for mine, theirs in zip(real[3:], mirror[3:], strict=True):
            assert redis.lrange(mine, 0, -1) == redis.lrange(theirs, 0, -1), f"case {case}: {mine}"
            assert redis.exists(mine) == redis.exists(theirs), f"case {case}: {mine}"
