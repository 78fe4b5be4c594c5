"""``os.fork()`` of a process that uses Wurk: the child gets pools, scripts,
statsd and a worker of its own, and the parent keeps working with its own.

The forking process is a subprocess (``tests.worker.fork_app``), so pytest's
own process is never forked; this module reads what it left in Redis.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator

import pytest

from tests.helpers import ROOT
from tests.worker import fork_app


@pytest.fixture
def statsd_listener() -> Iterator[socket.socket]:
    listener = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    listener.bind(("127.0.0.1", 0))
    yield listener
    listener.close()


def received(listener: socket.socket) -> list[tuple[str, int, int]]:
    """Every packet waiting on ``listener``: (metric, creator pid, sender pid)."""
    listener.setblocking(False)
    packets = []
    while True:
        try:
            data = listener.recv(4096)
        except BlockingIOError:
            return packets
        metric, creator, sender = data.decode().split("|")
        packets.append((metric, int(creator), int(sender)))


@pytest.fixture
def forked(config, redis_url, statsd_listener) -> dict:
    """Run the forking process once and return its summary, with the packets."""
    env = {**os.environ, "REDIS_URL": redis_url, "STATSD_PORT": str(statsd_listener.getsockname()[1])}
    done = subprocess.run(
        [sys.executable, "-c", "import sys; from tests.worker.fork_app import main; sys.exit(main())"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    for symptom in ("Protocol error", "Connection reset", "Traceback"):
        assert symptom not in done.stderr, done.stderr
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    summary["packets"] = received(statsd_listener)
    return summary


def test_children_exit_cleanly_and_the_parent_keeps_working(forked):
    assert forked["errors"] == []
    assert len(forked["children"]) == fork_app.CHILDREN
    assert set(forked["children"].values()) == {0}
    assert forked["after"] == {"queued": 1, "web": "parent", "custom": 1}


def test_fork_hooks_fire_in_the_right_process(forked, redis):
    parent = forked["parent"]
    children = {int(pid) for pid in forked["children"]}
    for key in ("events", "plugin_events"):
        events = Counter(entry.decode() for entry in redis.lrange(key, 0, -1))
        # Once per fork in the parent (not a one-shot event), once in each child.
        assert events == Counter(
            {f"before_fork:{parent}": fork_app.CHILDREN, **{f"fork:{pid}": 1 for pid in children}}
        ), key


def test_parent_and_children_never_share_a_connection(forked, redis):
    # Replies crossing between processes on a shared socket would lose or
    # misplace increments; every total is exact.
    assert int(redis.get("parent")) == fork_app.INCRS
    for index in range(fork_app.CHILDREN):
        assert int(redis.get(f"child:{index}")) == fork_app.INCRS
    assert int(redis.get("parent_bg")) == forked["parent_bg"] > 0
    assert int(redis.get("custom")) == 1 + fork_app.CHILDREN
    assert int(redis.get("web_child")) == fork_app.CHILDREN


def test_children_run_the_jobs_as_workers_of_their_own(forked, redis):
    children = {int(pid) for pid in forked["children"]}
    done = {int(number): int(count) for number, count in redis.hgetall("done").items()}
    assert done == dict.fromkeys(range(fork_app.JOBS), 1)
    assert {int(pid) for pid in redis.smembers("job_pids")} <= children
    identities = [json.loads(entry) for entry in redis.lrange("identities", 0, -1)]
    assert sorted(identities) == sorted([pid, pid] for pid in children)
    assert redis.llen("queue:default") == 0


def test_each_process_sends_statsd_through_a_client_of_its_own(forked):
    parent = forked["parent"]
    children = {int(pid) for pid in forked["children"]}
    senders = {(metric, creator, sender) for metric, creator, sender in forked["packets"]}
    assert ("parent.ready", parent, parent) in senders
    assert ("parent.after", parent, parent) in senders
    for pid in children:
        assert ("child.ready", pid, pid) in senders
    # Each child's job metrics come from the client it built, never the parent's.
    job_senders = {(creator, sender) for metric, creator, sender in forked["packets"] if metric == "jobs.count"}
    assert job_senders
    assert job_senders <= {(pid, pid) for pid in children}
