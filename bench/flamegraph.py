"""A flame graph of one worker draining a full queue, for docs/performance.md.

Where a job's time goes is easiest to read from a flame graph of a real
worker: this fills ``queue:default`` of a private Valkey with ``--jobs``
Sidekiq-format payloads, starts one worker (``-c 5``, job logging off,
``async_concurrency: 500``) pinned to core 0 with the server on core 1, and
records it with py-spy (``pip install py-spy``) from its first job to its
last, sampling only the threads that hold the GIL, so the graph shows the
worker's CPU time::

    python bench/flamegraph.py noop docs/profiles/noop-drain.svg
    python bench/flamegraph.py async100 docs/profiles/async100-drain.svg --jobs 10000

``noop`` jobs do nothing; ``async100`` jobs are ``async def perform`` that
await ``asyncio.sleep(0.1)``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

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

CLASSES = {"noop": "flame_jobs.Noop", "async100": "flame_jobs.Sleep100"}


def fill(conn: redis.Redis, job_class: str, jobs: int) -> None:
    now = time.time() * 1000
    with conn.pipeline(transaction=False) as pipe:
        for start in range(0, jobs, 1000):
            payloads = [
                json.dumps({"class": job_class, "args": [i], "jid": f"{i:024x}", "queue": "default", "retry": True,
                            "created_at": now, "enqueued_at": now})
                for i in range(start, min(start + 1000, jobs))
            ]  # fmt: skip
            pipe.lpush("queue:default", *payloads)
        pipe.sadd("queues", "default")
        pipe.execute()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("kind", choices=sorted(CLASSES))
    parser.add_argument("output", type=Path, help="the SVG to write")
    parser.add_argument("--jobs", type=int, default=30_000)
    parser.add_argument("--py-spy", default=shutil.which("py-spy") or "py-spy", help="the py-spy binary")
    options = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="wurk-flamegraph-"))
    (work / "flame_jobs.py").write_text(JOB_MODULE)
    (work / "flame.yml").write_text("skip_default_job_logging: true\nasync_concurrency: 500\n")
    server = ServerProcess(valkey_binary()).start()
    try:
        os.sched_setaffinity(server.process.pid, {1})
        conn = redis.Redis.from_url(server.url)
        fill(conn, CLASSES[options.kind], options.jobs)
        command = [sys.executable, "-m", "wurk.cli", "-r", "flame_jobs.py", "-c", "5", "-C", "flame.yml"]
        env = {**os.environ, "REDIS_URL": server.url}
        worker = subprocess.Popen(command, cwd=work, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        os.sched_setaffinity(worker.pid, {0})
        while conn.llen("queue:default") == options.jobs:
            time.sleep(0.005)
        record = [options.py_spy, "record", "-r", "500", "-f", "flamegraph", "--gil", "--nonblocking"]
        spy = subprocess.Popen([*record, "-o", str(options.output), "--pid", str(worker.pid)])
        while conn.llen("queue:default") > 0:
            time.sleep(0.02)
        time.sleep(0.3)  # the last jobs' acknowledgements
        spy.send_signal(signal.SIGINT)
        spy.wait(60)
        worker.terminate()
        worker.wait(30)
    finally:
        server.stop()
    print(f"wrote {options.output}")


if __name__ == "__main__":
    main()
