"""The swarm with real forks, real signals and a real server.

Each test starts ``python -m wurk_swarm -r tests.swarm.swarm_app`` (the
``wurkswarm`` command) in a session of its own, drives it with signals and
judges the outcome from outside: the jobs' evidence file, the keyspace
(``processes`` and the process hashes), the parent's log and its exit status.
Whatever happens, the fixture KILLs the whole session it started (the parent
and every child it forked), so no test leaves a worker behind.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis as redis_py

from tests.helpers import ROOT, WITH_SIGINT, wait_for, wait_for_beats

pytestmark = pytest.mark.timeout(120)

APP = "tests.swarm.swarm_app"
NOTE = "tests.swarm.swarm_app.Note"
HOG = "tests.swarm.swarm_app.Hog"
GATHER = "tests.swarm.swarm_app.Gather"
FAST = {"SWARM_HEARTBEAT": "0.5", "SWARM_SCHEDULER_POLL": "0.5", "SWARM_FETCH_POLL": "0.5", "WURK_LEADER": "false"}


class Swarm:
    """One ``wurkswarm`` parent, its log, and the evidence its children's jobs leave."""

    def __init__(
        self, tmp: Path, redis_url: str, args: list[str], env: dict[str, str], sigint: signal.Handlers | None = None
    ) -> None:
        """``sigint``: how the parent starts out treating SIGINT (see :class:`tests.helpers.Subprocess`)."""
        self.log = tmp / "swarm.log"
        self.evidence = tmp / "evidence.jsonl"
        full_env = {
            **os.environ,
            **FAST,
            "REDIS_URL": redis_url,
            "PYTHONPATH": str(ROOT),
            "SWARM_EVIDENCE": str(self.evidence),
            **env,
        }
        command = [sys.executable, "-m", "wurk_swarm", "-r", APP, *args]
        if sigint is not None:
            command = [sys.executable, "-c", WITH_SIGINT, sigint.name, *command]
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                command,
                env=full_env,
                cwd=ROOT,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    @property
    def pid(self) -> int:
        return self.proc.pid

    def signal(self, signum: int) -> None:
        self.proc.send_signal(signum)

    def wait(self, timeout: float) -> int:
        return self.proc.wait(timeout)

    def text(self) -> str:
        return self.log.read_text("utf-8", "replace") if self.log.exists() else ""

    def slots(self) -> dict[int, int]:
        """pid -> slot, for every child the parent has forked so far."""
        return {int(pid): int(slot) for pid, slot in re.findall(r"child (\d+) started for slot (\d+)", self.text())}

    def events(self) -> list[dict[str, Any]]:
        if not self.evidence.exists():
            return []
        return [json.loads(line) for line in self.evidence.read_text("utf-8").split("\n")[:-1]]

    def jids(self, event: str) -> set[str]:
        return {entry["jid"] for entry in self.events() if entry["event"] == event}

    def cleanup(self) -> None:
        """KILL the session: the parent and every child it forked, even mid-test."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.proc.wait(10)


@pytest.fixture
def swarms(redis_url: str, tmp_path: Path) -> Iterator[Any]:
    started: list[Swarm] = []

    def start(*args: str, sigint: signal.Handlers | None = None, **env: str) -> Swarm:
        folder = tmp_path / f"swarm-{len(started)}"
        folder.mkdir()
        swarm = Swarm(folder, env.pop("redis_url", redis_url), list(args), env, sigint)
        started.append(swarm)
        return swarm

    yield start
    for swarm in started:
        swarm.cleanup()  # also when the parent is gone: an orphaned child would still be in its group


def push(client: redis_py.Redis, job_class: str, *arglists: list[Any], queue: str = "default") -> list[str]:
    now = int(time.time() * 1000)
    jobs = [
        {
            "class": job_class,
            "queue": queue,
            "args": list(args),
            "retry": True,
            "jid": os.urandom(12).hex(),
            "created_at": now,
            "enqueued_at": now,
        }
        for args in arglists
    ]
    pipe = client.pipeline(transaction=False)
    pipe.sadd("queues", queue)
    for job in jobs:
        pipe.lpush(f"queue:{queue}", json.dumps(job))
    pipe.execute()
    return [job["jid"] for job in jobs]


def live_pids(client: redis_py.Redis) -> set[int]:
    """The pids of the processes in ``processes`` whose hash is still there."""
    pids = set()
    for identity in client.smembers("processes"):
        if client.exists(identity):
            pids.add(int(identity.decode().split(":")[-2]))
    return pids


def process_hash(client: redis_py.Redis, pid: int) -> dict[bytes, bytes]:
    for identity in client.smembers("processes"):
        if int(identity.decode().split(":")[-2]) == pid:
            return client.hgetall(identity)
    return {}


def children_of(parent: int) -> set[int]:
    """The live pids whose parent is ``parent`` (from /proc)."""
    found = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    fields = stat.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == parent and fields[0] != "Z":
                found.add(int(entry))
    return found


def running(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie waiting for its adopter to reap it is not)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# -- the fleet -------------------------------------------------------------------


def test_two_children_heartbeat_as_separate_processes_and_run_jobs(swarms, redis):
    swarm = swarms("-c", "1", "-t", "2", WURK_COUNT="2")
    pids = wait_for(lambda: len(live_pids(redis)) == 2 and live_pids(redis), timeout=30)
    assert isinstance(pids, set)
    assert swarm.pid not in pids
    assert pids == children_of(swarm.pid)
    jids = push(redis, NOTE, *[[n, 0.2] for n in range(12)])
    wait_for(lambda: swarm.jids("done") == set(jids), timeout=30)
    assert {entry["pid"] for entry in swarm.events()} == pids  # both children took work

    # USR1 to a child is an explicit no-op: it keeps running and nothing is respawned.
    child = min(pids)
    os.kill(child, signal.SIGUSR1)
    signalled = time.time()
    # The end marker: a beat the child stamped after the signal was sent. An
    # unhandled USR1 (its default action ends the process) would have killed
    # it before any further beat.
    wait_for(lambda: float(process_hash(redis, child).get(b"beat", 0)) > signalled, timeout=30)
    assert children_of(swarm.pid) == pids
    assert "respawning" not in swarm.text()

    swarm.signal(signal.SIGTERM)
    assert swarm.wait(2 + 5 + 3) == 0
    assert "every child has exited" in swarm.text()
    assert redis.scard("processes") == 0


def test_a_child_runs_async_jobs_together_on_its_loop_beside_its_threads_jobs(swarms, redis):
    swarm = swarms("-c", "1", "-t", "2", WURK_COUNT="1")
    (child,) = wait_for(lambda: live_pids(redis), timeout=30)
    gathered = push(redis, GATHER, *[[n, 20] for n in range(20)])
    noted = push(redis, NOTE, *[[n, 0.05] for n in range(5)])
    wait_for(lambda: swarm.jids("done") >= set(gathered) | set(noted), timeout=60)
    done = [entry for entry in swarm.events() if entry["event"] == "done" and entry["jid"] in gathered]
    # Twenty awaited at once in the one child, whose one thread also ran the others.
    assert {entry["pid"] for entry in done} == {child}
    assert {entry["label"] for entry in done} == {"wurk-asyncio"}
    swarm.signal(signal.SIGTERM)
    assert swarm.wait(10) == 0


def test_kill_9_child_is_respawned_and_its_job_reclaimed_and_completed(swarms, redis):
    swarm = swarms("-c", "1", "-t", "2", WURK_COUNT="1")
    (first,) = wait_for(lambda: live_pids(redis), timeout=30)
    (jid,) = push(redis, NOTE, ["long", 3])
    wait_for(lambda: jid in swarm.jids("start"), timeout=30)
    os.kill(first, signal.SIGKILL)

    wait_for(lambda: jid in swarm.jids("done"), timeout=30)
    done = [e for e in swarm.events() if e["jid"] == jid and e["event"] == "done"]
    (second,) = children_of(swarm.pid)
    assert second != first
    assert [e["pid"] for e in done] == [second]
    assert re.search(rf"child {first} of slot 0 killed by SIGKILL after [\d.]+s; respawning in 1s", swarm.text())
    assert not [key for key in redis.scan_iter(match="queue:default|*") if redis.llen(key)]

    swarm.signal(signal.SIGTERM)
    assert swarm.wait(10) == 0


def test_term_drains_every_child_within_timeout_plus_grace_and_exits_0(swarms, redis):
    swarm = swarms("-c", "2", "-t", "2", WURK_COUNT="2")
    wait_for(lambda: len(live_pids(redis)) == 2, timeout=30)
    short = push(redis, NOTE, ["short-a", 1], ["short-b", 1])
    stuck = push(redis, NOTE, ["stuck", 60])
    wait_for(lambda: set(short + stuck) <= swarm.jids("start"), timeout=30)
    children = children_of(swarm.pid)

    started = time.monotonic()
    swarm.signal(signal.SIGTERM)
    assert swarm.wait(2 + 5 + 2) == 0
    assert time.monotonic() - started < 2 + 5
    assert set(short) <= swarm.jids("done")  # finished within the timeout
    assert stuck[0] not in swarm.jids("done")
    assert [json.loads(job)["jid"] for job in redis.lrange("queue:default", 0, -1)] == stuck  # given back
    assert not [pid for pid in children if os.path.exists(f"/proc/{pid}")]
    assert redis.scard("processes") == 0


def test_int_stops_a_swarm_started_with_sigint_ignored(swarms, redis):
    # A script's `wurkswarm ... &` starts it with SIGINT ignored; the parent
    # handles INT itself, so Ctrl-C's signal still drains and stops the swarm.
    swarm = swarms("-c", "1", "-t", "1", WURK_COUNT="1", sigint=signal.SIG_IGN)
    pids = wait_for(lambda: len(live_pids(redis)) == 1 and live_pids(redis), timeout=30)
    assert isinstance(pids, set)
    swarm.signal(signal.SIGINT)
    assert swarm.wait(1 + 5 + 2) == 0
    assert "swarm: received INT; stopping 1 child (KILL after" in swarm.text()  # not "1 children"
    assert not [pid for pid in pids if running(pid)]
    assert redis.scard("processes") == 0


def test_a_child_that_cannot_act_on_term_is_killed_at_the_deadline_and_the_parent_still_exits_0(swarms, redis):
    swarm = swarms("-c", "1", "-t", "1", WURK_COUNT="2")
    pids = wait_for(lambda: len(live_pids(redis)) == 2 and live_pids(redis), timeout=30)
    assert isinstance(pids, set)
    wedged, healthy = sorted(pids)
    os.kill(wedged, signal.SIGSTOP)  # as good as a child stuck in C code: TERM stays pending
    swarm.signal(signal.SIGTERM)
    assert swarm.wait(1 + 5 + 10) == 0
    text = swarm.text()
    assert f"swarm: child {healthy} exited (status 0)" in text
    assert f"swarm: child {wedged} still running after 6s; KILL" in text
    assert f"swarm: child {wedged} exited (killed by SIGKILL)" in text
    assert text.rstrip().endswith("swarm: every child has exited; bye")
    assert not [pid for pid in pids if os.path.exists(f"/proc/{pid}")]


def test_children_of_a_kill_9_parent_stop_as_on_term_and_give_their_jobs_back(swarms, redis):
    swarm = swarms("-c", "1", "-t", "1", WURK_COUNT="2")
    pids = wait_for(lambda: len(live_pids(redis)) == 2 and live_pids(redis), timeout=30)
    assert isinstance(pids, set)
    # A child holds at most twice its concurrency (one running, one claimed
    # ahead), so of four jobs each child runs one; the others wait in the
    # queue or in a child's private list.
    jids = push(redis, NOTE, *[[f"long-{n}", 60] for n in range(4)])
    wait_for(lambda: {entry["pid"] for entry in swarm.events()} == pids, timeout=30)

    killed = time.monotonic()
    swarm.signal(signal.SIGKILL)  # the parent alone: its children are not told
    assert swarm.wait(10) == -signal.SIGKILL
    wait_for(lambda: not [pid for pid in pids if running(pid)], timeout=10)
    assert time.monotonic() - killed < 5

    text = swarm.text()
    for pid in pids:
        assert f"swarm child {pid}: the swarm parent {swarm.pid} is gone; shutting down as on TERM" in text
        assert re.search(rf"pid={pid} .*: gave [12] unfinished job\(s\) back to their queues", text)
    assert sorted(json.loads(job)["jid"] for job in redis.lrange("queue:default", 0, -1)) == sorted(jids)
    assert not [key for key in redis.scan_iter(match="queue:default|*") if redis.llen(key)]  # none stranded
    assert not swarm.jids("done")
    assert redis.scard("processes") == 0  # each child unregistered itself on the way out


def test_tstp_is_relayed_and_sticky_across_a_respawn(swarms, redis):
    swarm = swarms("-c", "1", "-t", "2", WURK_COUNT="1")
    (first,) = wait_for(lambda: live_pids(redis), timeout=30)
    swarm.signal(signal.SIGTSTP)
    wait_for(lambda: process_hash(redis, first).get(b"quiet") == b"true", timeout=10)

    os.kill(first, signal.SIGKILL)
    (second,) = wait_for(lambda: children_of(swarm.pid) - {first}, timeout=15)
    wait_for(lambda: second in live_pids(redis), timeout=15)
    wait_for(lambda: process_hash(redis, second).get(b"quiet") == b"true", timeout=10)
    (jid,) = push(redis, NOTE, ["while quiet"])
    # A child that fetched would take the job at once. A swarm child has no
    # thread dump to show that nothing is left to fetch (TTIN is not handled,
    # by design), so the marker is three beats of its own heartbeat: time as
    # the child lived it, however loaded the machine.
    identity = next(name for name in redis.smembers("processes") if int(name.decode().split(":")[-2]) == second)
    wait_for_beats(redis, identity, 3)
    assert jid not in swarm.jids("start")
    assert redis.llen("queue:default") == 1
    assert re.search(rf"child {second} started for slot 0 \(queues default, concurrency 1, quiet\)", swarm.text())

    swarm.signal(signal.SIGTERM)
    assert swarm.wait(10) == 0


def test_usr2_is_relayed_so_every_process_reopens_its_log(swarms, redis, tmp_path):
    log = tmp_path / "rotated.log"
    swarm = swarms("-c", "1", "-t", "2", WURK_COUNT="2", SWARM_LOG=str(log))
    wait_for(lambda: len(live_pids(redis)) == 2, timeout=30)
    wait_for(lambda: log.exists() and log.read_text().count("starting 1 thread on") == 2, timeout=10)
    log.rename(tmp_path / "rotated.log.1")  # what logrotate does
    swarm.signal(signal.SIGUSR2)
    wait_for(log.exists, timeout=10)  # the parent reopened at once
    jids = push(redis, NOTE, *[[n, 0.3] for n in range(8)])
    wait_for(lambda: swarm.jids("done") == set(jids), timeout=30)
    swarm.signal(signal.SIGTERM)
    assert swarm.wait(10) == 0
    text = log.read_text()
    for pid in {entry["pid"] for entry in swarm.events()}:
        assert f"pid={pid} " in text  # each child writes to the new file
    assert "swarm: received TERM" in text


def test_a_child_that_cannot_reach_redis_crashes_and_is_respawned_with_backoff(swarms):
    url = f"redis://127.0.0.1:{closed_port()}/0"
    swarm = swarms("-c", "1", "-t", "2", WURK_COUNT="1", redis_url=url)
    wait_for(lambda: "respawning in 2s" in swarm.text(), timeout=20)
    text = swarm.text()
    assert re.search(r"swarm child \d+: Redis at redis://127\.0\.0\.1:\d+/0 is unreachable .*respawned", text)
    assert re.search(r"child \d+ of slot 0 status 1 after [\d.]+s; respawning in 1s", text)
    assert re.search(r"child \d+ of slot 0 status 1 after [\d.]+s; respawning in 2s", text)
    assert swarm.proc.poll() is None  # the parent itself needs no Redis
    swarm.signal(signal.SIGTERM)
    assert swarm.wait(10) == 0


# -- rolling restarts and memory ------------------------------------------------------------


class Load:
    """Keeps the queue fed with short jobs and samples the live processes, on two threads."""

    def __init__(self, redis_url: str) -> None:
        self.client = redis_py.Redis.from_url(redis_url)
        self.pushed: list[str] = []
        self.samples: list[set[int]] = []
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self.feed), threading.Thread(target=self.sample)]
        for thread in self.threads:
            thread.start()

    def feed(self) -> None:
        number = 0
        while not self.stop.is_set():
            self.pushed += push(self.client, NOTE, [f"load-{number}", 0.05])
            number += 1
            time.sleep(0.02)

    def sample(self) -> None:
        while not self.stop.is_set():
            self.samples.append(live_pids(self.client))
            time.sleep(0.05)

    def end(self) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(10)
        self.client.close()


@pytest.mark.slow
def test_usr1_replaces_every_child_with_a_slot_always_staffed_and_no_job_lost(swarms, redis, redis_url):
    swarm = swarms("-c", "2", "-t", "3", WURK_COUNT="2")
    first = wait_for(lambda: len(live_pids(redis)) == 2 and live_pids(redis), timeout=30)
    assert isinstance(first, set)
    load = Load(redis_url)
    try:
        # Twenty samples before the restart and twenty after it, counted, not
        # slept: a loaded machine samples slower, and still covers both.
        wait_for(lambda: len(load.samples) >= 20, timeout=30)
        before = len(load.samples)
        swarm.signal(signal.SIGUSR1)
        wait_for(lambda: swarm.text().count("restarted") == 2, timeout=60)
        during = len(load.samples) - before
        wait_for(lambda: len(load.samples) >= before + during + 20, timeout=30)
    finally:
        load.end()
    wait_for(lambda: set(load.pushed) <= swarm.jids("done"), timeout=30)
    slots = swarm.slots()
    after = children_of(swarm.pid)
    assert len(after) == 2
    assert not after & first
    assert sorted(slots[pid] for pid in after) == [0, 1]
    assert during >= 5, "the samples must cover the hand-overs"
    for sample in load.samples:
        staffed = {slots[pid] for pid in sample if pid in slots}
        assert staffed == {0, 1}, f"a slot had no heartbeating child: {sample}"
    assert "respawning" not in swarm.text()
    swarm.signal(signal.SIGTERM)
    assert swarm.wait(15) == 0


@pytest.mark.slow
def test_a_child_past_the_memory_limit_is_recycled_gracefully(swarms, redis):
    swarm = swarms("-c", "1", "-t", "3", WURK_COUNT="1", WURK_MAXMEM_MB="160", SWARM_MEMORY_INTERVAL="0.5")
    (first,) = wait_for(lambda: live_pids(redis), timeout=30)
    (hog,) = push(redis, HOG, ["hog", 200])
    wait_for(lambda: hog in swarm.jids("done"), timeout=30)
    wait_for(lambda: re.search(rf"child {first} RSS \d+KB >= 163840KB; recycling", swarm.text()), timeout=15)
    wait_for(lambda: f"child {first} exited; slot 0 restarted" in swarm.text(), timeout=30)
    (second,) = children_of(swarm.pid)
    assert second != first
    (after,) = push(redis, NOTE, ["after recycling"])
    wait_for(lambda: after in swarm.jids("done"), timeout=30)
    assert [e["pid"] for e in swarm.events() if e["jid"] == after and e["event"] == "done"] == [second]
    assert "respawning" not in swarm.text()  # a graceful hand-over, not a crash
    swarm.signal(signal.SIGTERM)
    assert swarm.wait(15) == 0


# -- the command line ------------------------------------------------------------------


def test_wurk_swarm_and_wurkswarm_take_the_worker_flags():
    wurk_help = subprocess.run(
        [sys.executable, "-m", "wurk.cli", "swarm", "--help"], capture_output=True, text=True, check=True
    ).stdout
    script_help = subprocess.run(
        [sys.executable, "-m", "wurk_swarm", "--help"], capture_output=True, text=True, check=True
    ).stdout
    for flag in ("-c, --concurrency", "-q, --queue", "-r, --require", "-t, --timeout", "-e, --environment"):
        assert flag in wurk_help
        assert flag in script_help
    for flag in ("-g, --tag", "-C, --config", "-v, --verbose"):
        assert flag in script_help
    version = subprocess.run([sys.executable, "-m", "wurk_swarm", "-V"], capture_output=True, text=True, check=True)
    assert version.stdout.startswith("wurkswarm ")


BAD_SCHEDULE_APP = """
import wurk


class ReportJob(wurk.Job):
    def perform(self):
        pass


@wurk.configure_server
def configure(config):
    config.periodic(lambda mgr: mgr.register("0 9 * * MON-FRI", ReportJob))
"""


def test_children_refusing_their_configuration_stop_the_swarm_with_one_line_each(swarms, tmp_path):
    (tmp_path / "periodic_app.py").write_text(BAD_SCHEDULE_APP, encoding="utf-8")
    swarm = swarms("-r", str(tmp_path / "periodic_app.py"), "-c", "1", "-t", "2", WURK_COUNT="2")
    assert swarm.wait(30) == 2
    text = swarm.text()
    assert "Traceback" not in text
    refusals = re.findall(r"swarm child \d+: (.*)", text)
    assert refusals, text
    assert set(refusals) == {
        "periodic job periodic_app.ReportJob: cron schedule '0 9 * * MON-FRI': day-of-week field 'MON-FRI' is "
        "not '*', a number, a list 'a,b', a range 'a-b' or a step '/n' (names and L W # ? are not supported)"
    }
    assert re.search(r"swarm: child \d+ refused its configuration \(its line above says why\); stopping", text)
    assert "respawning" not in text  # every child would refuse it alike


def test_a_bad_redis_url_is_refused_in_the_parent_before_any_fork(swarms):
    swarm = swarms("-c", "1", WURK_COUNT="1", redis_url="http://localhost:6379/0")
    assert swarm.wait(30) == 2
    assert swarm.text().strip() == (
        "wurk: Redis URL 'http://localhost:6379/0' has scheme http://; use one of redis://, rediss://, unix://, redis+sentinel://."
    )


def test_a_broken_app_fails_in_the_parent_with_one_line(swarms, tmp_path):
    bad = tmp_path / "broken.py"
    bad.write_text("raise RuntimeError('no app today')\n")
    result = subprocess.run(
        [sys.executable, "-m", "wurk_swarm", "-r", str(bad)], capture_output=True, text=True, timeout=30
    )
    assert result.returncode == 2
    assert "no app today" in result.stderr


def test_the_children_share_the_health_check_port_and_a_survivor_takes_it_over(swarms, redis):
    port = closed_port()
    swarm = swarms("-c", "1", "-t", "2", WURK_COUNT="2", SWARM_HEALTH_PORT=str(port))
    wait_for(lambda: len(live_pids(redis)) == 2, timeout=30)

    def live() -> int | None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/live", timeout=2) as response:
                return response.status
        except (OSError, urllib.error.HTTPError):
            return None

    wait_for(lambda: live() == 200, timeout=15)
    serving = wait_for(lambda: server_pid(port), timeout=10)
    assert serving in children_of(swarm.pid)
    os.kill(serving, signal.SIGKILL)
    wait_for(lambda: live() == 200 and server_pid(port) not in (None, serving), timeout=5)
    assert "respawning" in swarm.text()  # the killed child is replaced too
    swarm.signal(signal.SIGTERM)
    assert swarm.wait(10) == 0


def server_pid(port: int) -> int | None:
    """The pid holding a listening socket on ``port`` (from /proc/net/tcp and the fd tables)."""
    inodes = set()
    with open("/proc/net/tcp") as table:
        for line in table.readlines()[1:]:
            fields = line.split()
            if int(fields[1].split(":")[1], 16) == port and fields[3] == "0A":  # LISTEN
                inodes.add(fields[9])
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            for fd in os.listdir(f"/proc/{entry}/fd"):
                if os.readlink(f"/proc/{entry}/fd/{fd}").removeprefix("socket:[").rstrip("]") in inodes:
                    return int(entry)
        except OSError:
            continue
    return None


def test_the_parent_works_as_pid_1_of_a_container(redis_url, redis, tmp_path):
    if not shutil.which("unshare"):
        pytest.skip("unshare is not installed")
    probe = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", "true"], capture_output=True, check=False)
    if probe.returncode != 0:
        pytest.skip(f"cannot make a PID namespace here: {probe.stderr.decode(errors='replace').strip()}")
    evidence = tmp_path / "evidence.jsonl"
    env = {**os.environ, **FAST, "REDIS_URL": redis_url, "PYTHONPATH": str(ROOT), "SWARM_EVIDENCE": str(evidence)}
    argv = ["unshare", "--pid", "--fork", "--mount-proc", "--kill-child"]
    argv += [sys.executable, "-m", "wurk_swarm", "-r", APP, "-c", "1", "-t", "2"]
    with (tmp_path / "swarm.log").open("wb") as out:
        proc = subprocess.Popen(
            argv,
            env={**env, "WURK_COUNT": "2"},
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        (pid_one,) = wait_for(lambda: children_of(proc.pid), timeout=10)  # the parent, as seen from here
        wait_for(lambda: len(live_pids(redis)) == 2, timeout=30)
        assert 1 not in live_pids(redis)  # the children have pids of the namespace; PID 1 is the parent
        os.kill(pid_one, signal.SIGTSTP)  # PID 1 gets only the signals it has handlers for
        wait_for(lambda: all(process_hash(redis, pid).get(b"quiet") == b"true" for pid in live_pids(redis)), 10)
        os.kill(pid_one, signal.SIGTERM)
        assert proc.wait(2 + 5 + 3) == 0
        assert redis.scard("processes") == 0
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)


def test_a_swarm_started_with_shard_serves_that_shard_in_every_child(swarms, redis, shard_url):
    east = redis_py.Redis.from_url(shard_url)
    swarm = swarms("-c", "1", "-t", "2", "--shard", "east", WURK_COUNT="2", WURK_SHARDS=f"east={shard_url}")
    pids = wait_for(lambda: len(live_pids(east)) == 2 and live_pids(east), timeout=30)
    assert pids == children_of(swarm.pid)
    jids = push(east, NOTE, *[[n, 0.1] for n in range(6)])
    main_jids = push(redis, NOTE, ["main"])
    wait_for(lambda: swarm.jids("done") == set(jids), timeout=30)
    assert redis.scard("processes") == 0  # the main server has no worker of this swarm
    assert redis.llen("queue:default") == 1
    assert not swarm.jids("start") & set(main_jids)
    swarm.signal(signal.SIGTERM)
    assert swarm.wait(2 + 5 + 3) == 0
    east.close()
