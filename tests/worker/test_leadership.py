"""Leadership both ways: gained and lost, asked for at any moment, fenced.

The first tests drive :class:`wurk.server.leader.Leader` objects in this process on
the test server; the rest run real workers (``tests.worker.leader_app``) with
fast elections, pause one with SIGSTOP, and read the events they recorded.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator

import pytest

import wurk
from tests.helpers import WorkerPool, wait_for
from tests.worker.conftest import FAST
from wurk.server.identity import ProcessIdentity
from wurk.server.leader import NOT_LEADING, SERVICE, Leader, Leadership, fenced_set, leadership

ELECTION = {"TEST_LEADER_TTL": "2", "TEST_LEADER_RENEW": "0.5", "TEST_LEADER_FOLLOWER": "0.5"}


class Transitions:
    """Records every ``wurk_leader`` / ``wurk_leader_lost`` call."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    @wurk.hookimpl
    def wurk_leader(self) -> None:
        self.seen.append("leader")

    @wurk.hookimpl
    def wurk_leader_lost(self) -> None:
        self.seen.append("leader_lost")


@pytest.fixture
def transitions(config) -> Iterator[Transitions]:
    plugin = Transitions()
    config.plugins.register(plugin, name="transitions")
    yield plugin
    config.plugins.unregister("transitions")


def test_a_refused_renewal_fires_leader_lost_once_and_fences_the_old_token(config, redis, transitions):
    first, second = Leader(config, "host:1:aaaaaaaaaaaa"), Leader(config, "host:2:bbbbbbbbbbbb")
    config.register(SERVICE, first)
    lost: list[str] = []
    config.on("leader_lost", lambda: lost.append("first"))
    assert leadership(config) == NOT_LEADING
    assert first.campaign()
    old = first.fence()
    assert old == int(redis.get("leader-token"))
    assert leadership(config) == Leadership(True, old)
    assert fenced_set(config, "report", "from the first", old)
    redis.delete("dear-leader")  # the lease ran out while the first was paused
    assert second.campaign()
    assert second.fence() == old + 1
    assert not fenced_set(config, "report", "stale", old)  # refused inside Redis
    assert redis.get("report") == b"from the first"
    assert first.leads()  # its cached lease has not run out: only the fence stops it
    assert not first.campaign()  # the renewal is refused
    assert leadership(config) == NOT_LEADING
    assert (first.leads(), first.fence(), first.token) == (False, None, None)
    assert not first.campaign()  # still a follower: nothing more to announce
    first.stop()
    assert transitions.seen == ["leader", "leader", "leader_lost"]
    assert lost == ["first"]
    assert fenced_set(config, "report", "fresh", old + 1, ex=30)
    assert redis.get("report") == b"fresh"
    assert 0 < redis.ttl("report") <= 30
    second.stop()
    assert transitions.seen[-1] == "leader_lost"  # the release at shutdown
    assert redis.get("dear-leader") is None


def test_a_pause_shorter_than_the_lock_keeps_the_lead_silently(config, redis, transitions):
    leader = Leader(config, "host:1:aaaaaaaaaaaa")
    assert leader.campaign()
    token = leader.fence()
    leader._until = 0.0  # the cached lease ran out, as after a long pause
    assert not leader.leads()  # nobody acts meanwhile
    assert leader.campaign()  # the lock still names us: no one else led
    assert leader.leadership() == Leadership(True, token)
    leader.stop()
    leader.stop()
    assert transitions.seen == ["leader", "leader_lost"]


def events(redis, pid: int | None = None) -> list[str]:
    rows = [row.decode() for row in redis.lrange("leadership", 0, -1)]
    if pid is None:
        return rows
    return [row.split(" ", 1)[1] for row in rows if row.split(" ")[0] == str(pid)]


def holder_pid(redis) -> int | None:
    holder = redis.get("dear-leader")
    return int(holder.decode().split(":")[1]) if holder else None


@pytest.fixture
def leader_workers(config, redis_url, tmp_path) -> Iterator[WorkerPool]:
    pool = WorkerPool(redis_url, tmp_path, "tests.worker.leader_app", {**FAST, **ELECTION})
    yield pool
    for worker in pool.started:
        if worker.proc.poll() is None:
            worker.signal(signal.SIGCONT)  # a stopped process cannot act on TERM
    pool.stop_all()


def test_a_paused_leader_loses_the_lead_once_and_stops_acting(leader_workers, redis):
    first = leader_workers.start("-c", "1")
    wait_for(lambda: holder_pid(redis) == first.pid, timeout=30)
    second = leader_workers.start("-c", "1")
    wait_for(lambda: redis.scard("processes") == 2 and redis.get(f"acts:{first.pid}"), timeout=30)
    assert holder_pid(redis) == first.pid
    first.signal(signal.SIGSTOP)
    wait_for(lambda: holder_pid(redis) == second.pid, timeout=30)
    wait_for(lambda: redis.get(f"acts:{second.pid}"), timeout=30)
    first.signal(signal.SIGCONT)
    wait_for(lambda: "hook:leader_lost" in events(redis, first.pid), timeout=30)
    wait_for(lambda: redis.get(f"leads:{first.pid}") == b"0", timeout=30)
    acts = int(redis.get(f"acts:{first.pid}"))
    wait_for(lambda: int(redis.get(f"acts:{second.pid}")) >= 10, timeout=30)  # a while of the second leading
    assert int(redis.get(f"acts:{first.pid}")) == acts
    assert redis.get("acted").decode().split(" ")[0] == str(second.pid)
    for worker in (first, second):
        worker.signal(signal.SIGTERM)
        assert worker.wait(30) == 0
    first_token = int(events(redis, first.pid)[1].split(" ")[1])
    assert events(redis, first.pid) == [
        "on:leader",
        f"hook:leader {first_token}",
        "on:leader_lost",
        "hook:leader_lost",
        "exit",
    ]
    assert events(redis, second.pid) == [
        "on:leader",
        f"hook:leader {first_token + 1}",
        "on:leader_lost",  # released at its graceful stop
        "hook:leader_lost",
        "exit",
    ]


def test_a_leader_whose_lock_is_taken_fires_leader_lost(leader_workers, redis):
    worker = leader_workers.start("-c", "1")
    wait_for(lambda: holder_pid(redis) == worker.pid, timeout=30)
    redis.set("dear-leader", "elsewhere:1:cccccccccccc", ex=600)  # a rival took the lock
    wait_for(lambda: "hook:leader_lost" in events(redis, worker.pid), timeout=30)
    wait_for(lambda: redis.get(f"leads:{worker.pid}") == b"0", timeout=30)
    worker.signal(signal.SIGTERM)
    assert worker.wait(30) == 0
    assert redis.get("dear-leader") == b"elsewhere:1:cccccccccccc"  # not ours to release
    assert [event.split(" ")[0] for event in events(redis, worker.pid)] == [
        "on:leader",
        "hook:leader",
        "on:leader_lost",
        "hook:leader_lost",
        "exit",
    ]


def test_a_graceful_stop_releases_and_announces_before_exit(leader_workers, redis):
    worker = leader_workers.start("-c", "1")
    wait_for(lambda: holder_pid(redis) == worker.pid and redis.get(f"acts:{worker.pid}"), timeout=30)
    worker.signal(signal.SIGTERM)
    assert worker.wait(30) == 0
    assert redis.get("dear-leader") is None
    assert [event.split(" ")[0] for event in events(redis, worker.pid)][-3:] == [
        "on:leader_lost",
        "hook:leader_lost",
        "exit",
    ]


def test_a_process_on_a_sigkilled_leaders_host_takes_the_lead_at_once(config, redis_url, redis, tmp_path):
    # Default election timings: without the takeover the successor would
    # wait out the 30 s lease and then its 60 s follower pause.
    pool = WorkerPool(redis_url, tmp_path, "tests.worker.leader_app", FAST)
    try:
        first = pool.start("-c", "1")
        # The token is taken (INCR) just after the lease: wait for both.
        wait_for(lambda: holder_pid(redis) == first.pid and redis.get("leader-token"), timeout=30)
        first_token = int(redis.get("leader-token"))
        first.kill()
        assert redis.ttl("dear-leader") > 20, "the dead leader's lease still runs"
        second = pool.start("-c", "1")
        wait_for(lambda: holder_pid(redis) == second.pid, timeout=15)
        wait_for(lambda: int(redis.get("leader-token") or 0) > first_token, timeout=15)
        assert int(redis.get("leader-token")) == first_token + 1
        wait_for(lambda: f"hook:leader {first_token + 1}" in events(redis, second.pid), timeout=15)
        second.signal(signal.SIGTERM)
        assert second.wait(30) == 0
        assert f"took the lead from {socket.gethostname()}:{first.pid}:" in second.output()
    finally:
        pool.stop_all()


def test_a_lock_held_by_a_live_process_or_another_host_is_not_taken(config, redis):
    leader = Leader(config, "here:1:aaaaaaaaaaaa")
    here = socket.gethostname()
    # A live process on this host (this very test process, under a nonce it
    # runs a worker with) and a holder on another host keep the lock.
    live = ProcessIdentity.current()
    live.register()
    try:
        for holder in (live.identity, f"elsewhere-{here}:999999999:bbbbbbbbbbbb"):
            redis.set("dear-leader", holder, ex=30)
            assert not leader.campaign(), holder
            assert redis.get("dear-leader").decode() == holder
    finally:
        live.unregister()
    # Our own pid under a nonce no worker here runs: a restarted container's
    # predecessor, gone.
    dead = f"{here}:{os.getpid()}:cccccccccccc"
    redis.set("dear-leader", dead, ex=30)
    assert leader.campaign()
    assert redis.get("dear-leader") == b"here:1:aaaaaaaaaaaa"


def test_a_follower_on_the_leaders_host_watches_it_and_leads_within_a_second_of_its_death(config, redis):
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        redis.set("dear-leader", f"{socket.gethostname()}:{holder.pid}:dddddddddddd", ex=30)
        follower = Leader(config, "here:1:eeeeeeeeeeee")
        assert not follower.campaign()
        assert follower.next_wait() == 1.0  # watched locally, not every 60 s
        redis.config_resetstat()
        follower.tick()  # the leader lives: no Redis call at all
        assert "cmdstat_get" not in redis.info("commandstats")
        holder.kill()
        holder.wait(10)
        follower.tick()
        assert follower.leads()
        assert redis.get("dear-leader") == b"here:1:eeeeeeeeeeee"
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait(10)


def test_a_follower_of_a_leader_on_another_host_waits_its_full_interval(config, redis):
    redis.set("dear-leader", "elsewhere-host:1:ffffffffffff", ex=30)
    follower = Leader(config, "here:1:eeeeeeeeeeee")
    assert not follower.campaign()
    assert follower.next_wait() == 60
