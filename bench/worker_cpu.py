"""Worker CPU per no-op job, for two or more Wurk installs side by side.

A change to the worker's hot path is judged by what it costs a job, and the
machine's load moves that figure more than most changes do. So the installs
run alternately, round by round, against one private Valkey, and the report
gives each install's median and, per round, each install's ratio to the
first one (median and min–max)::

    python bench/worker_cpu.py --python /path/to/before/bin/python --python .venv/bin/python
    python bench/worker_cpu.py --python A/bin/python --python B/bin/python --rounds 7 --jobs 30000

Each round fills ``queue:default`` with ``--jobs`` Sidekiq-format payloads
(the same bytes for every install), starts one worker (``-c 5``, job logging
off, or on with ``--logging``, to a file) pinned to core 0 with the server on core 1, and reads the worker's CPU
time (user + system) from the moment the queue first shrinks until it is
empty: boot and shutdown are outside the window. Nothing here asserts.

``--async-sleep`` makes every job an ``async def perform`` that awaits
``asyncio.sleep(0.1)``, with ``async_concurrency: 500``: a long drain of
such jobs is bound by the worker's CPU a job on the event loop, so the
report gives the rate too (jobs claimed per second over the same window)::

    python bench/worker_cpu.py --python A/bin/python --python B/bin/python --async-sleep --logging --jobs 60000
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import redis

from wurk.redis.servers import ServerProcess, valkey_binary

JOB_MODULE = """\
import asyncio

import wurk


class Noop(wurk.Job):
    def perform(self, *args):
        pass


class Sleep100(wurk.Job):
    async def perform(self, *args):
        await asyncio.sleep(0.1)
"""

ASYNC_CONCURRENCY = 500


def fill(conn: redis.Redis, jobs: int, klass: str = "noop_jobs.Noop") -> None:
    now = time.time() * 1000
    with conn.pipeline(transaction=False) as pipe:
        for start in range(0, jobs, 1000):
            batch = [
                json.dumps(
                    {
                        "class": klass,
                        "args": [i],
                        "jid": f"{i:024x}",
                        "queue": "default",
                        "retry": True,
                        "created_at": now,
                        "enqueued_at": now,
                    }
                )
                for i in range(start, min(start + 1000, jobs))
            ]
            pipe.lpush("queue:default", *batch)
        pipe.sadd("queues", "default")
        pipe.execute()


def worker_config(work: Path, logging: bool, asynchronous: bool) -> Path | None:
    """The worker's config file for these options (written once for every
    round), or None when the defaults are what is measured."""
    settings = [f"async_concurrency: {ASYNC_CONCURRENCY}"] if asynchronous else []
    if not logging:
        settings.append("skip_default_job_logging: true")
    if not settings:
        return None
    config = work / "worker.yml"
    config.write_text("".join(f"{line}\n" for line in settings))
    return config


def one_round(python: str, url: str, jobs: int, work: Path, job_class: str, config: Path | None) -> tuple[float, float]:
    """Worker CPU microseconds per job, and jobs claimed per second, for one
    drain by ``python``'s Wurk."""
    conn = redis.Redis.from_url(url)
    conn.flushdb()
    fill(conn, jobs, job_class)
    env = {**os.environ, "REDIS_URL": url}
    command = [python, "-m", "wurk.cli", "-r", "noop_jobs.py", "-q", "default", "-c", "5"]
    if config is not None:
        command += ["-C", str(config)]
    with open(work / "worker.log", "wb") as log:
        worker = subprocess.Popen(command, cwd=work, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        os.sched_setaffinity(worker.pid, {0})
        process = psutil.Process(worker.pid)
        while conn.llen("queue:default") == jobs:
            if worker.poll() is not None:
                raise SystemExit(f"{python}: the worker exited at boot:\n{(work / 'worker.log').read_text()}")
            time.sleep(0.005)
        before, left, began = sum(process.cpu_times()[:2]), conn.llen("queue:default"), time.monotonic()
        while conn.llen("queue:default") > 0:
            time.sleep(0.01)
        after, ended = sum(process.cpu_times()[:2]), time.monotonic()
        return (after - before) / left * 1e6, left / (ended - began)
    finally:
        worker.terminate()
        try:
            worker.wait(30)
        except subprocess.TimeoutExpired:
            worker.kill()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--python", action="append", required=True, help="a Python with Wurk installed (give two or more)"
    )
    parser.add_argument("--jobs", type=int, default=30_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--logging", action="store_true", help="the default job logging on (two lines a job, to the worker's log file)"
    )
    parser.add_argument(
        "--async-sleep",
        action="store_true",
        help=f"async def jobs awaiting a 100 ms sleep, async_concurrency {ASYNC_CONCURRENCY}, instead of no-op jobs",
    )
    options = parser.parse_args()
    if len(options.python) < 2:
        parser.error("give --python at least twice: the figures are ratios between installs")
    work = Path(tempfile.mkdtemp(prefix="wurk-worker-cpu-"))
    (work / "noop_jobs.py").write_text(JOB_MODULE)
    config = worker_config(work, options.logging, options.async_sleep)
    job_class = "noop_jobs.Sleep100" if options.async_sleep else "noop_jobs.Noop"
    server = ServerProcess(valkey_binary()).start()
    try:
        os.sched_setaffinity(server.process.pid, {1})
        results: dict[str, list[float]] = {python: [] for python in options.python}
        rates: dict[str, list[float]] = {python: [] for python in options.python}
        for number in range(options.rounds):
            for python in options.python:
                figure, rate = one_round(python, server.url, options.jobs, work, job_class, config)
                results[python].append(figure)
                rates[python].append(rate)
                print(f"round {number + 1}: {python}: {figure:.1f} us/job, {rate:,.0f} jobs/s", file=sys.stderr)
    finally:
        server.stop()
    first = options.python[0]
    logged = "job logging on" if options.logging else "job logging off"
    kind = f"async 100 ms sleep job, async_concurrency {ASYNC_CONCURRENCY}" if options.async_sleep else "no-op job"
    print(f"worker CPU per {kind}, {options.jobs} jobs, {options.rounds} rounds, -c 5, {logged}")
    for python, figures in results.items():
        ratios = [mine / base for mine, base in zip(figures, results[first], strict=True)]
        speed = [mine / base for mine, base in zip(rates[python], rates[first], strict=True)]
        print(
            f"  {python}: median {statistics.median(figures):.1f} us/job; vs first: "
            f"{statistics.median(ratios):.3f} ({min(ratios):.3f}-{max(ratios):.3f}); "
            f"{statistics.median(rates[python]):,.0f} jobs/s, vs first: "
            f"{statistics.median(speed):.3f} ({min(speed):.3f}-{max(speed):.3f})"
        )


if __name__ == "__main__":
    main()
