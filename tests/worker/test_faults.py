"""Fault scenarios for a running worker: what Redis or the host does to it mid-flight.

Each test drives real ``wurk`` worker processes against a real server and
then judges the outcome from outside: the jobs' own evidence file
(``tests/worker/fault_app.py``), the keyspace and the worker process. They
guard that a worker

* keeps fetching after the server loses its script cache (``SCRIPT FLUSH``, or
  a restart that replays an AOF), with no restart of its own;
* picks up a job on any of its queues at once while idle, not after the
  block on its first queue times out;
* sends every unreadable payload (invalid UTF-8, not JSON, not an object) to
  the dead set byte for byte and leaves nothing in its private lists;
* stops a poison pill, with or without a jid, at the documented three
  recoveries, without blaming the healthy jobs claimed next to it;
* running as PID 1 of a container, recovers the jobs of its own previous
  incarnation (also PID 1);
* never holds more than two jobs per thread in its private lists;
* gives back a job whose claim was executed but whose reply was lost.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import redis as redis_py

from tests.helpers import ROOT, WorkerPool, new_server, server_kind, wait_for
from tests.worker.fault_app import EVIDENCE_ENV, Killer, Note
from wurk.redis.servers import ServerProcess, redis_binary, valkey_binary

APP = "tests.worker.fault_app"
FAST = {"FAULT_SCHEDULER_POLL": "0.5", "FAULT_HEARTBEAT": "0.5"}

pytestmark = pytest.mark.timeout(90)


# -- evidence and keyspace ------------------------------------------------------------------


class Evidence:
    """The JSON lines the jobs append: one per start and one per end."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def events(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        text = self.path.read_text("utf-8")
        return [json.loads(line) for line in text.split("\n")[:-1]]  # the last piece may be half written

    def jids(self, event: str) -> set[str]:
        return {entry["jid"] for entry in self.events() if entry["event"] == event}

    def runs(self, label: str) -> int:
        return sum(1 for entry in self.events() if entry["event"] == "start" and entry["label"] == label)

    def started_at(self, jid: str) -> float | None:
        return next((e["at"] for e in self.events() if e["jid"] == jid and e["event"] == "start"), None)


@pytest.fixture
def evidence(tmp_path: Path) -> Evidence:
    return Evidence(tmp_path / "evidence.jsonl")


@pytest.fixture
def fault_workers(redis_url: str, tmp_path: Path, evidence: Evidence) -> Iterator[WorkerPool]:
    pool = WorkerPool(redis_url, tmp_path, APP, {**FAST, EVIDENCE_ENV: str(evidence.path)})
    yield pool
    pool.stop_all()


def wire_name(job_class: type) -> str:
    return f"{job_class.__module__}.{job_class.__qualname__}"


def payload(job_class: type, queue: str, args: Sequence[Any], **extra: Any) -> dict[str, Any]:
    now = int(time.time() * 1000)
    job = {"class": wire_name(job_class), "queue": queue, "args": list(args), "retry": True}
    job.update({"jid": os.urandom(12).hex(), "created_at": now, "enqueued_at": now})
    job.update(extra)
    return job


def push(client: redis_py.Redis, queue: str, job_class: type, arglists: Sequence[Sequence[Any]]) -> list[str]:
    """LPUSH Sidekiq-form jobs, the first given fetched first; their jids."""
    jobs = [payload(job_class, queue, args) for args in arglists]
    pipe = client.pipeline(transaction=False)
    pipe.sadd("queues", queue)
    for job in jobs:
        pipe.lpush(f"queue:{queue}", json.dumps(job))
    pipe.execute()
    return [job["jid"] for job in jobs]


def private_lists(client: redis_py.Redis) -> dict[str, int]:
    """Every private list (``queue:<q>|<host>|<pid>|<nonce>|0``) and its length."""
    return {key.decode(): client.llen(key) for key in client.scan_iter(match="queue:*|*", count=1000)}


def claimed(client: redis_py.Redis) -> int:
    keys = list(client.scan_iter(match="queue:*|*", count=1000))
    if not keys:
        return 0
    pipe = client.pipeline(transaction=False)
    for key in keys:
        pipe.llen(key)
    return sum(pipe.execute())


def eventually(predicate: Callable[[], object], timeout: float, state: Callable[[], object]) -> None:
    """``wait_for``, failing with a description of the state that was not reached."""
    try:
        wait_for(predicate, timeout=timeout, interval=0.05)
    except AssertionError:
        raise AssertionError(f"not reached within {timeout}s: {state()}") from None


def drained(client: redis_py.Redis, queue: str = "default") -> bool:
    """The queue and every private list empty at one instant. Both are read in
    one MULTI: read one after the other, a job moving between them in between
    (the reaper's recovery, a suspect given back to its queue) is seen in
    neither, and a job still waiting in its queue passes for done."""
    pipe = client.pipeline(transaction=True)
    pipe.llen(f"queue:{queue}")
    pipe.keys("queue:*|*")
    waiting, private = pipe.execute()
    return waiting == 0 and not private


def alive(worker: Any) -> bool:
    return worker.proc.poll() is None


def test_drained_never_misses_a_job_moving_between_its_queue_and_a_private_list(redis):
    redis.lpush("queue:default", json.dumps({"jid": "moving"}))
    private = "queue:default|elsewhere|1|aaaaaaaaaaaa|0"
    stop = threading.Event()

    def shuttle() -> None:
        while not stop.is_set():
            redis.lmove("queue:default", private, "RIGHT", "LEFT")
            redis.lmove(private, "queue:default", "LEFT", "RIGHT")

    mover = threading.Thread(target=shuttle, daemon=True)
    mover.start()
    try:
        assert not any(drained(redis) for _ in range(2000))
    finally:
        stop.set()
        mover.join(10)


# -- the script cache goes away -----------------------------------------------------------------------


def test_a_script_flush_mid_drain_does_not_stop_fetching(fault_workers, redis, evidence):
    # Jobs of 0.1 s: once 20 are done, seconds of work are left (five threads
    # cannot run them faster, and a loaded machine only runs them slower), so
    # the flush lands mid-drain however slowly this test gets to send it.
    jids = push(redis, "default", Note, [[n, 0.1] for n in range(150)])
    worker = fault_workers.start("-c", "5")
    eventually(lambda: len(evidence.jids("done")) >= 20, 30, lambda: f"{len(evidence.jids('done'))} done")
    # In one MULTI: what the worker holds at the flush, the flush, and jobs
    # that can only be fetched after it.
    tail = [payload(Note, "default", [f"after-{n}"]) for n in range(10)]
    pipe = redis.pipeline(transaction=True)
    pipe.keys("queue:default|*")
    pipe.script_flush()
    for job in tail:
        pipe.lpush("queue:default", json.dumps(job))
    held, *_ = pipe.execute()
    assert held, "the flush must land mid-drain, while the worker holds claimed jobs"
    jids += [job["jid"] for job in tail]

    def state() -> str:
        missing = len(set(jids) - evidence.jids("done"))
        return f"{missing} jobs never ran; queue {redis.llen('queue:default')}; private {private_lists(redis)}"

    eventually(lambda: set(jids) <= evidence.jids("done"), 20, state)
    eventually(lambda: drained(redis), 10, state)
    assert alive(worker), "the worker carried on by itself"


def test_a_server_restart_with_aof_mid_drain_does_not_stop_fetching(tmp_path, evidence):
    server = new_server(data_dir=tmp_path / "data", persist=True).start()
    client = redis_py.Redis.from_url(server.url)
    pool = WorkerPool(server.url, tmp_path, APP, {**FAST, EVIDENCE_ENV: str(evidence.path)})
    try:
        # Jobs of 0.1 s, as in the flush test: seconds of work left once 20 are done.
        jids = push(client, "default", Note, [[n, 0.1] for n in range(150)])
        worker = pool.start("-c", "5")
        eventually(lambda: len(evidence.jids("done")) >= 20, 30, lambda: f"{len(evidence.jids('done'))} done")
        server.stop()  # SIGTERM: the server writes out its AOF
        time.sleep(1)  # an outage of a second: the worker's commands fail meanwhile
        server.start()  # same port, same directory: it replays the AOF
        assert client.llen("queue:default") + sum(private_lists(client).values()) > 0, "the restart is mid-drain"
        jids += push(client, "default", Note, [[f"after-{n}"] for n in range(10)])  # fetched after the restart only

        def state() -> str:
            missing = len(set(jids) - evidence.jids("done"))
            return f"{missing} jobs never ran; queue {client.llen('queue:default')}; private {private_lists(client)}"

        eventually(lambda: set(jids) <= evidence.jids("done"), 25, state)
        eventually(lambda: drained(client), 10, state)
        assert alive(worker), "the worker carried on by itself"
    finally:
        pool.stop_all()
        client.close()
        server.stop()


# -- an idle worker serves every queue ---------------------------------------------------------------


def test_an_idle_worker_picks_up_a_job_on_any_of_its_queues_at_once(fault_workers, redis, evidence):
    # One thread, so the measure does not depend on where other threads are in their block.
    worker = fault_workers.start("-c", "1", "-q", "a", "-q", "b", "-q", "c", env={"FAULT_FETCH_POLL": "5"})
    eventually(lambda: redis.scard("processes") == 1, 30, lambda: worker.log.read_text())
    pickups: dict[str, list[float]] = {"a": [], "c": []}
    for queue in ("a", "c", "a", "c", "a", "c"):
        # Waiting for work: a waiter blocked on each of the three queues.
        eventually(lambda: blocked_in_blmove(redis) == 3, 30, lambda: redis.client_list())
        enqueued = time.time()
        [jid] = push(redis, queue, Note, [[queue]])
        started = wait_for(lambda jid=jid: evidence.started_at(jid), timeout=10, interval=0.01)
        pickups[queue].append(started - enqueued)
    # The fetch block is 5 s: a pickup from "c" waiting for the blocks on "a"
    # and "b" to time out would take seconds. Under 2 s leaves a loaded
    # machine room and still tells the two apart.
    assert statistics.median(pickups["c"]) < 2.0, pickups
    assert statistics.median(pickups["a"]) < 2.0, pickups


def blocked_in_blmove(client: redis_py.Redis) -> int:
    """Connections blocked in a ``BLMOVE``: a worker's waiters, waiting for work."""
    return sum(1 for entry in client.client_list() if entry["cmd"] == "blmove" and "b" in entry["flags"])


# -- payloads nobody can read -------------------------------------------------------------------------

GARBAGE = [
    b"\xff\xfe\xfd",
    b'{"class":"x","jid":"\xff\xfe"}',
    b"not json",
    b"[1,2]",
]


def test_unreadable_payloads_go_to_the_dead_set_as_they_are(fault_workers, redis, evidence):
    good: list[str] = []
    for bad in GARBAGE:
        good += push(redis, "default", Note, [[f"good-{len(good) + n}"] for n in range(5)])
        redis.lpush("queue:default", bad)
    good += push(redis, "default", Note, [[f"good-{len(good) + n}"] for n in range(5)])
    worker = fault_workers.start("-c", "5")

    def state() -> str:
        missing = len(set(good) - evidence.jids("done"))
        dead = redis.zrange("dead", 0, -1)
        return f"{missing} good jobs never ran; dead {dead}; private {private_lists(redis)}; alive {alive(worker)}"

    eventually(lambda: set(good) <= evidence.jids("done"), 20, state)
    eventually(lambda: redis.zcard("dead") == len(GARBAGE), 10, state)
    assert sorted(redis.zrange("dead", 0, -1)) == sorted(GARBAGE)
    eventually(lambda: drained(redis), 10, state)
    [later] = push(redis, "default", Note, [["later"]])
    eventually(lambda: later in evidence.jids("done"), 10, state)
    assert alive(worker)
    eventually(lambda: drained(redis), 10, state)


# -- a job that kills its worker ---------------------------------------------------------------------


@pytest.mark.parametrize("with_jid", [True, False], ids=["with-jid", "without-jid"])
def test_a_poison_pill_is_stopped_at_three_recoveries_sparing_its_neighbours(fault_workers, redis, evidence, with_jid):
    healthy = push(redis, "default", Note, [[f"ok-{n}", 0.2] for n in range(15)])
    pill = payload(Killer, "default", ["pill"])
    if not with_jid:
        del pill["jid"]
    redis.lpush("queue:default", json.dumps(pill))
    healthy += push(redis, "default", Note, [[f"ok-{n}", 0.2] for n in range(15, 30)])

    restarts = 0
    worker = fault_workers.start("-c", "5")
    deadline = time.monotonic() + 45
    # The test is the supervisor: a worker that dies is replaced, as systemd or Kubernetes would.
    while not (alive(worker) and drained(redis)):
        if not alive(worker):
            restarts += 1
            assert restarts <= 8, f"still crash-looping after {restarts - 1} restarts; dead {dead_labels(redis)}"
            worker = fault_workers.start("-c", "5")
        assert time.monotonic() < deadline, f"queue {redis.llen('queue:default')}, private {private_lists(redis)}"
        time.sleep(0.05)

    assert dead_labels(redis) == ["pill"], "only the poison pill is dead"
    [dead] = [json.loads(member) for member in redis.zrange("dead", 0, -1)]
    assert dead["class"] == wire_name(Killer)
    assert dead.get("jid") == pill.get("jid")
    assert evidence.runs("pill") <= 3, "the documented threshold is three recoveries"
    missing = set(healthy) - evidence.jids("done")  # at least once; a rerun is allowed
    assert not missing, f"not done: {missing}; {where_are(redis, missing, evidence)}"


def where_are(client: redis_py.Redis, jids: set[str], evidence: Evidence) -> str:
    """Where each of ``jids`` is, for a failure message: a sorted set, a list, the evidence."""
    found = []
    for key in ("retry", "schedule", "dead"):
        for member in client.zrange(key, 0, -1):
            job = json.loads(member)
            if job.get("jid") in jids:
                found.append(f"{job['jid']} in {key}: {job.get('error_class')}: {job.get('error_message')}")
    for key in client.scan_iter(match="*", count=1000):
        if client.type(key) == b"list":
            for member in client.lrange(key, 0, -1):
                if any(jid.encode() in member for jid in jids):
                    found.append(f"in list {key.decode()}")
    events = [event for event in evidence.events() if event.get("jid") in jids]
    return f"found {found or 'nowhere'}; evidence {events}"


def dead_labels(client: redis_py.Redis) -> list[str]:
    return sorted(json.loads(member)["args"][0] for member in client.zrange("dead", 0, -1))


# -- a container restart: the new worker is PID 1 again ---------------------------------------------


def unshare_problem() -> str | None:
    if not shutil.which("unshare"):
        return "unshare is not installed"
    probe = subprocess.run(
        ["unshare", "--pid", "--fork", "--mount-proc", "true"], capture_output=True, timeout=30, check=False
    )
    if probe.returncode != 0:
        return f"cannot make a PID namespace here: {probe.stderr.decode(errors='replace').strip()}"
    return None


class PidOneWorker:
    """A worker that is PID 1 of its own PID namespace, as in a container."""

    def __init__(self, redis_url: str, log: Path, env: dict[str, str]) -> None:
        argv = ["unshare", "--pid", "--fork", "--mount-proc", "--kill-child"]
        argv += [sys.executable, "-m", "wurk.cli", "-r", APP, "-c", "2"]
        with log.open("wb") as out:
            self.proc = subprocess.Popen(
                argv,
                env={**os.environ, "REDIS_URL": redis_url, **env},
                cwd=ROOT,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def kill(self) -> None:
        """SIGKILL to the unshare process and the namespace's PID 1 (its process group)."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(30)


def test_a_worker_restarted_as_pid_1_recovers_what_its_previous_incarnation_held(redis_url, redis, evidence, tmp_path):
    problem = unshare_problem()
    if problem:
        pytest.skip(problem)
    env = {**FAST, EVIDENCE_ENV: str(evidence.path), "FAULT_REAPER_INTERVAL": "1"}
    jids = push(redis, "default", Note, [[f"slow-{n}", 3] for n in range(2)])
    started: list[PidOneWorker] = []
    try:
        started.append(PidOneWorker(redis_url, tmp_path / "first.log", env))
        eventually(lambda: evidence.jids("start") >= set(jids), 30, lambda: (tmp_path / "first.log").read_text())
        held = private_lists(redis)
        assert held
        assert all(key.split("|")[2] == "1" for key in held), held  # the worker is PID 1
        assert {entry["pid"] for entry in evidence.events()} == {1}
        started[0].kill()
        assert private_lists(redis) == held

        started.append(PidOneWorker(redis_url, tmp_path / "second.log", env))

        def state() -> str:
            return f"done {len(evidence.jids('done'))} of {len(jids)}; private {private_lists(redis)}"

        eventually(lambda: set(jids) <= evidence.jids("done"), 25, state)
        eventually(lambda: drained(redis), 10, state)
        assert {entry["pid"] for entry in evidence.events()} == {1}  # the second incarnation is PID 1 too
    finally:
        for worker in started:
            worker.kill()


# -- how much one worker holds ---------------------------------------------------------------------


def test_a_worker_holds_at_most_two_jobs_per_thread(fault_workers, redis, evidence):
    # Jobs of 2 ms: short enough that a worker is tempted to claim ahead of its threads.
    jids = push(redis, "default", Note, [[n, 0.002] for n in range(400)])
    fault_workers.start("-c", "10")
    samples = []
    deadline = time.monotonic() + 30
    while not samples or samples[-1] or redis.llen("queue:default"):
        samples.append(claimed(redis))
        assert time.monotonic() < deadline, f"not drained: queue {redis.llen('queue:default')}, held {samples[-1]}"
        time.sleep(0.002)
    assert set(jids) <= evidence.jids("done")
    assert max(samples) <= 2 * 10, f"{max(samples)} jobs sat in the private lists of a worker with 10 threads"


# -- a claim whose reply never arrives ---------------------------------------------------------------


class DebuggableServer(ServerProcess):
    """A private server that accepts DEBUG from loopback (``DEBUG SLEEP`` stalls it)."""

    def command(self) -> list[str]:
        return [*super().command(), "--enable-debug-command", "local"]


def wait_for_blocking_fetch(client: redis_py.Redis, timeout: float = 30) -> None:
    """Return just after the worker sends a ``BLMOVE`` (seen through ``MONITOR``)."""
    deadline = time.monotonic() + timeout
    with client.monitor() as monitor:
        while time.monotonic() < deadline:
            if monitor.next_command()["command"].upper().startswith("BLMOVE "):
                return
    raise AssertionError(f"no BLMOVE within {timeout}s")


def test_a_claim_whose_reply_is_lost_is_given_back(tmp_path, evidence):
    binary = redis_binary() if server_kind() == "redis" else valkey_binary()
    server = DebuggableServer(binary).start()
    client = redis_py.Redis.from_url(server.url, socket_timeout=30)
    # Block 1 s, so the fetch connection's read timeout is 2 s.
    env = {**FAST, EVIDENCE_ENV: str(evidence.path), "FAULT_FETCH_POLL": "1", "FAULT_READ_TIMEOUT": "1"}
    pool = WorkerPool(server.url, tmp_path, APP, env)
    try:
        worker = pool.start("-c", "1")
        eventually(lambda: client.scard("processes") == 1, 30, lambda: worker.log.read_text())
        jobs = [payload(Note, "default", [f"stalled-{n}"]) for n in range(3)]
        wait_for_blocking_fetch(client)
        # Atomically: the jobs arrive, then the server stalls 3 s. The blocked BLMOVE is
        # served as the stall ends, a second after the worker stopped reading its reply;
        # the worker's retry, sent during the stall, is served next and answered in time.
        stall = client.pipeline(transaction=True)
        for job in jobs:
            stall.lpush("queue:default", json.dumps(job))
        stall.execute_command("DEBUG", "SLEEP", "3")
        stall.execute()
        jids = {job["jid"] for job in jobs}

        def state() -> str:
            missing = len(jids - evidence.jids("done"))
            return f"{missing} jobs never ran; queue {client.llen('queue:default')}; private {private_lists(client)}"

        eventually(lambda: jids <= evidence.jids("done"), 20, state)
        eventually(lambda: drained(client), 10, state)
        assert alive(worker)
    finally:
        pool.stop_all()
        client.close()
        server.stop()
