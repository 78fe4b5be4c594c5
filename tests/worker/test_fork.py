"""``os.fork()`` of a process that uses Wurk: the child gets pools, scripts,
statsd and a worker of its own, and the parent keeps working with its own.

The forking process is a subprocess (``tests.worker.fork_app``), so pytest's
own process is never forked; this module reads what it left in Redis.
"""

from __future__ import annotations

import json
import os
import re
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
def forked(config, redis_url, statsd_listener, tmp_path) -> dict:
    """Run the forking process once and return its summary, with the packets
    and the lines of the log file the parent and its children shared."""
    log = tmp_path / "fork.log"
    env = {
        **os.environ,
        "REDIS_URL": redis_url,
        "STATSD_PORT": str(statsd_listener.getsockname()[1]),
        "LOG_FILE": str(log),
    }
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
    summary["log"] = log.read_text(encoding="utf-8").splitlines()
    return summary


def test_children_exit_cleanly_and_the_parent_keeps_working(forked):
    assert forked["errors"] == []
    assert len(forked["children"]) == fork_app.CHILDREN
    assert set(forked["children"].values()) == {0}
    assert forked["after"] == {"queued": 1, "web": "parent", "custom": 1, "loop": True}


def test_a_buffered_job_is_replayed_by_the_parent_alone(forked, redis):
    assert [json.loads(job)["jid"] for job in redis.lrange("held", 0, -1)] == ["held"]


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


def test_children_run_async_jobs_on_a_loop_of_their_own(forked, redis):
    """The loop runner crossed the fork with its thread left behind: each
    child's first coroutine starts a loop in the child, and the embedded
    worker's ``async def`` jobs run there."""
    children = {int(pid) for pid in forked["children"]}
    done = {int(number): int(count) for number, count in redis.hgetall("async_done").items()}
    assert done == dict.fromkeys(range(fork_app.ASYNC_JOBS), 1)
    assert {int(pid) for pid in redis.smembers("async_pids")} <= children
    # Each child's coroutine ran on a loop thread of that child: the parent's
    # loop thread did not come along, so without the reset it would hang.
    loops = [entry.decode().split(" ") for entry in redis.lrange("loops", 0, -1)]
    assert sorted(int(pid) for pid, _, _ in loops) == sorted(children)
    assert {thread for _, thread, _ in loops} == {"wurk-asyncio"}
    assert int(forked["parent_loop"].split(" ")[0]) == forked["parent"]


#: A complete line of Wurk's default format: a timestamp, the pid, the level,
#: the message, nothing cut off or run into the next.
LINE = re.compile(r"^[A-Z]+ \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z pid=\d+ tid=\w+(?: \w+=\S+)*: (.*)$")


def test_log_lines_are_neither_lost_nor_cut_nor_repeated_across_the_fork(forked):
    """The parent logs without pause from a thread while it forks; each child
    then logs through the same handler. Every line is whole, each child's
    lines are all there, and no buffered parent line is written twice."""
    messages = []
    for line in forked["log"]:
        match = LINE.match(line)
        assert match, f"a cut or interleaved line: {line!r}"
        messages.append(match.group(1))
    children = {int(pid) for pid in forked["children"]}
    for pid in children:
        assert [m for m in messages if m.startswith(f"child {pid} ")] == [
            f"child {pid} line {n}" for n in range(fork_app.LOG_LINES)
        ]
    parent_lines = [m for m in messages if m.startswith("parent line ")]
    assert parent_lines == [f"parent line {n}" for n in range(forked["parent_lines"])]
