"""Slow jobs: how long one worker takes to run a burst of long jobs, against the ideal.

Run it from the bench virtualenv (see bench/README.md)::

    python bench/slow_jobs.py                      # 40 jobs of 5 s on -c 20
    python bench/slow_jobs.py --jobs 60 --seconds 2 --concurrency 10

A private Valkey server is started on a free loopback port and the queue is
filled before one ``wurk`` worker starts. Each job sleeps, then records when
it ended; the figure is the time from the worker's first job start to the
last job's end. With ``--jobs`` = 2 × ``--concurrency``, the ideal is two
rounds, 2 × ``--seconds``: a worker that claims jobs ahead of its threads
holds some behind running ones while a thread sits idle, and takes longer.
The largest number of jobs held in the worker's private lists at once is
printed too. Figures are for a human to read; nothing asserts on them.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import redis

from wurk.redis.servers import ServerProcess, valkey_binary

APP = """
import os
import time

import redis
import wurk

_conn = redis.Redis.from_url(os.environ["REDIS_URL"])


class Slow(wurk.Job):
    def perform(self, seconds):
        _conn.rpush("bench:started", repr(time.time()))
        time.sleep(seconds)
        _conn.rpush("bench:ended", repr(time.time()))
"""


def run(jobs: int, seconds: float, concurrency: int) -> dict[str, float]:
    server = ServerProcess(valkey_binary()).start()
    conn = redis.Redis.from_url(server.url)
    held = 0
    try:
        with tempfile.TemporaryDirectory() as workdir:
            Path(workdir, "slow_app.py").write_text(APP)
            for _ in range(jobs):
                payload = {"class": "slow_app.Slow", "args": [seconds], "jid": os.urandom(12).hex(), "queue": "default"}
                conn.lpush("queue:default", json.dumps(payload))
            env = {**os.environ, "REDIS_URL": server.url, "PYTHONPATH": workdir}
            command = [sys.executable, "-m", "wurk.cli", "-r", "slow_app", "-c", str(concurrency)]
            worker = subprocess.Popen(
                command, env=env, cwd=workdir, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
            )
            done = threading.Event()

            def sample() -> None:
                nonlocal held
                probe = redis.Redis.from_url(server.url)
                while not done.is_set():
                    private = sum(probe.llen(key) for key in probe.scan_iter("queue:default|*"))
                    held = max(held, private)
                    time.sleep(0.005)

            sampler = threading.Thread(target=sample)
            sampler.start()
            deadline = time.monotonic() + jobs * seconds + 60
            while conn.llen("bench:ended") < jobs and time.monotonic() < deadline:
                time.sleep(0.05)
            done.set()
            sampler.join()
            worker.terminate()
            worker.wait(30)
        started = [float(x) for x in conn.lrange("bench:started", 0, -1)]
        ended = [float(x) for x in conn.lrange("bench:ended", 0, -1)]
    finally:
        conn.close()
        server.stop()
    return {"makespan": max(ended) - min(started), "held": held, "ran": len(ended)}


def main() -> int:
    parser = argparse.ArgumentParser(description="Makespan of a burst of slow jobs on one worker.")
    parser.add_argument("--jobs", type=int, default=40)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--concurrency", type=int, default=20)
    args = parser.parse_args()
    ideal = -(-args.jobs // args.concurrency) * args.seconds
    result = run(args.jobs, args.seconds, args.concurrency)
    print(
        f"{result['ran']:.0f} jobs of {args.seconds:g} s on -c {args.concurrency}: "
        f"{result['makespan']:.1f} s (ideal {ideal:g} s); at most {result['held']:.0f} jobs held at once"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
