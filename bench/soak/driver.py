"""The soak driver: N jobs through a 2-child swarm with every plugin on, a fault every minute.

It starts its own servers (a Valkey broker with AOF on a free port, and a
ledger server no fault touches), a ``wurkswarm`` of two children and a
producer process; samples the processes' memory while the producer pushes
at a steady rate and the faults strike in rotation; waits for every job and
every batch callback; lets the TTLs that should end do so; and reports what
was lost, what ran twice, how memory moved and what the keyspace kept.
Everything is private: free loopback ports, a temporary directory, and
processes stopped by pid.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import platform
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import redis
from chaos.procfs import Proc, tree

import wurk
from soak import keyspace, ledger, report
from soak.faults import ROTATION, DebugServer, Injector
from soak.memory import Sampler
from wurk.redis.servers import ServerProcess, valkey_binary

BENCH = Path(__file__).resolve().parents[1]
REPO = BENCH.parent
RESULTS = BENCH / "results"

SHORT = {
    "jobs": 5000,
    "rate": 250.0,
    "fault_every": 3.0,
    "block": 250,
    "linger": 5,
    "unique_for": 30,
    "sample_every": 1.0,
    "warmup": 8.0,
    "settle": 10.0,
    "drain_timeout": 90.0,
    "progress_every": 5.0,
}
FULL = {
    "jobs": 1_000_000,
    "rate": 500.0,
    "fault_every": 60.0,
    "block": 1000,
    "linger": 60,
    "unique_for": 120,
    "sample_every": 5.0,
    "warmup": 120.0,
    "settle": 660.0,
    "drain_timeout": 600.0,
    "progress_every": 30.0,
}


class Soak:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.dir = Path(tempfile.mkdtemp(prefix="soak-"))
        self.broker = DebugServer(valkey_binary(), data_dir=self.dir / "broker", persist=True)
        self.ledger_server = ServerProcess(valkey_binary())
        self.swarm: subprocess.Popen[bytes] | None = None
        self.producer: subprocess.Popen[bytes] | None = None
        self.injector: Injector | None = None
        self.sampler: Sampler | None = None
        self.batches = -(-args.jobs // args.block)
        self.timeline: dict[str, float] = {}
        self.progress: list[dict[str, Any]] = []

    # -- processes ---------------------------------------------------------------------------

    def env(self) -> dict[str, str]:
        args = self.args
        return {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(BENCH), os.environ.get("PYTHONPATH", "")])),
            "REDIS_URL": self.broker.url,
            ledger.URL_ENV: self.ledger_server.url,
            "SOAK_KEY_1": self.key,
            "SOAK_UNIQUE_FOR": str(args.unique_for),
            "SOAK_WINDOW_COUNT": str(max(2, round(args.rate / 10 * 1.25))),
            "SOAK_SCHEDULER": args.scheduler,
            "SOAK_JOBS": str(args.jobs),
            "SOAK_RATE": str(args.rate),
            "SOAK_BLOCK": str(args.block),
            "SOAK_LINGER": str(args.linger),
            "WURK_COUNT": "2",
        }

    def spawn(self, name: str, argv: list[str]) -> subprocess.Popen[bytes]:
        with (self.dir / f"{name}.log").open("ab") as log:
            return subprocess.Popen(argv, env=self.env(), stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    def start(self) -> None:
        self.key = secrets.token_hex(32)
        self.broker.start()
        self.ledger_server.start()
        argv = [sys.executable, "-m", "wurk_swarm", "-r", "soak.app", "-q", "default"]
        self.swarm = self.spawn("swarm", [*argv, "-c", str(self.args.concurrency), "-t", "10"])
        if not _wait(lambda: self.live_processes() >= 2, 90):
            raise RuntimeError(f"the swarm did not heartbeat two children within 90 s; see {self.dir}/swarm.log")

    def live_processes(self) -> int:
        with contextlib.suppress(redis.RedisError):
            client = self.client()
            return sum(1 for name in client.smembers("processes") if client.exists(name))
        return 0

    def client(self) -> redis.Redis:
        return redis.Redis.from_url(self.broker.url, socket_timeout=15)

    def stop_swarm(self) -> float | None:
        """SIGTERM the parent (a graceful stop of every child), then SIGKILL what is left; seconds it took."""
        if self.swarm is None or self.swarm.poll() is not None:
            return None
        family = tree(self.swarm.pid)
        started = time.monotonic()
        self.swarm.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.swarm.wait(60)
        took = time.monotonic() - started
        for proc in family:
            proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.swarm.wait(10)
        return round(took, 2)

    # -- the run -----------------------------------------------------------------------------

    def run(self) -> dict[str, Any]:
        args = self.args
        self.start()
        assert self.swarm is not None
        led = redis.Redis.from_url(self.ledger_server.url)
        start = keyspace.summarize(keyspace.snapshot(self.client()), alive=_alive)
        self.sampler = Sampler(self.swarm.pid, args.sample_every).start()
        self.timeline["start"] = time.time()
        self.producer = self.spawn("producer", [sys.executable, "-m", "soak.produce"])
        kinds = tuple(args.faults.split(",")) if args.faults else ROTATION
        self.injector = Injector(self.broker, self.swarm.pid, args.fault_every, kinds).start()
        while self.producer.poll() is None:
            time.sleep(args.progress_every)
            self.report_progress(led)
        self.timeline["produced"] = time.time()
        self.injector.close()
        drained = self.drain(led)
        self.timeline["drained"] = time.time()
        end = keyspace.summarize(keyspace.snapshot(self.client()), alive=_alive)
        settled, settle_series = self.settle()
        self.timeline["settled"] = time.time()
        self.sampler.close()
        stop_s = self.stop_swarm()
        after_stop = keyspace.summarize(keyspace.snapshot(self.client()), alive=_alive)
        book = ledger.Book.read(led, args.jobs, self.batches)
        producer = {k.decode(): v.decode() for k, v in led.hgetall(ledger.PRODUCER).items()}
        return {
            "drained": drained,
            "producer": producer,
            "producer_exit": self.producer.returncode,
            "ledger": book.as_json(),
            "lost_found_in": locate(self.client(), book.missing[:20]),
            "faults": [event.as_json() for event in self.injector.events],
            "faults_injected": _count(
                event.kind for event in self.injector.events if not event.note.startswith("not injected")
            ),
            "memory": self.sampler.analyze(args.warmup),
            "keyspace": {
                "start": start,
                "drained": end,
                "settled": settled,
                "after_swarm_stop": after_stop,
                "growth_start_to_settled": keyspace.growth(start, settled),
                "work_left_settled": keyspace.work_left(settled),
                "settle_dbsize": settle_series,
                "batch_index": batch_index(self.client()),
                "dead_and_retry": dead_and_retry(self.client()),
            },
            "swarm_stop_s": stop_s,
            "swarm_restarts": swarm_restarts(self.dir / "swarm.log"),
            "timeline": {name: round(at - self.timeline["start"], 1) for name, at in self.timeline.items()},
            "progress": self.progress,
        }

    def report_progress(self, led: redis.Redis) -> None:
        assert self.injector is not None
        assert self.sampler is not None
        row: dict[str, Any] = {"t": round(time.time() - self.timeline["start"], 1)}
        row["pushed"] = int(led.hget(ledger.PRODUCER, "pushed") or 0)
        row["finished"] = int(led.bitcount(ledger.DONE))
        with contextlib.suppress(redis.RedisError):
            client = self.client()
            row["queued"] = int(client.llen("queue:default"))
            row["scheduled"] = int(client.zcard("schedule"))
            row["dbsize"] = int(client.dbsize())
        row["faults"] = len(self.injector.events)
        latest = {}
        for series in self.sampler.series.values():
            if series.samples and series.samples[-1][0] >= time.time() - 3 * self.args.sample_every:
                latest[f"{series.role} {series.pid}"] = series.samples[-1][1] // 1024
        row["rss_mb"] = latest
        self.progress.append(row)
        print(json.dumps(row), flush=True)

    def drain(self, led: redis.Redis) -> dict[str, Any]:
        """Wait until every job and every callback finished, or nothing moved for ``drain_timeout``."""
        started = time.monotonic()
        last, still_since = -1, time.monotonic()
        while True:
            book = ledger.Book.read(led, self.args.jobs, self.batches)
            done, callbacks = self.args.jobs - len(book.missing), self.batches - len(book.callbacks_missing)
            if done >= self.args.jobs and callbacks >= self.batches:
                return {"complete": True, "after_producer_s": round(time.monotonic() - started, 1)}
            if (done, callbacks) != last:
                last, still_since = (done, callbacks), time.monotonic()
            elif time.monotonic() - still_since > self.args.drain_timeout:
                return {
                    "complete": False,
                    "after_producer_s": round(time.monotonic() - started, 1),
                    "finished": done,
                    "callbacks": callbacks,
                }
            time.sleep(1)

    def settle(self) -> tuple[dict[str, Any], list[tuple[float, int]]]:
        """Wait, up to ``--settle`` s, for the work keys to go and the keys of dead processes to expire."""
        deadline = time.monotonic() + self.args.settle
        series: list[tuple[float, int]] = []
        while True:
            summary = keyspace.summarize(keyspace.snapshot(self.client()), alive=_alive)
            series.append((round(time.time() - self.timeline["start"], 1), summary["dbsize"]))
            if not any(keyspace.work_left(summary).values()) and not keyspace.of_dead_processes(summary):
                return summary, series
            if time.monotonic() > deadline:
                return summary, series
            time.sleep(5)

    def close(self, keep: bool) -> None:
        if self.injector is not None:
            self.injector.close()
        if self.sampler is not None:
            self.sampler.stop.set()
        for proc in (self.producer, self.swarm):
            if proc is not None and proc.poll() is None:
                for each in tree(proc.pid):
                    each.kill()
                proc.wait()
        self.broker.stop()
        self.ledger_server.stop()
        if not keep:
            shutil.rmtree(self.dir, ignore_errors=True)


def _alive(pid: int) -> bool:
    proc = Proc.of(pid)
    return proc is not None and proc.alive()


def _wait(condition: Any, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.2)
    return bool(condition())


def _count(kinds: Any) -> dict[str, int]:
    counted: dict[str, int] = {}
    for kind in kinds:
        counted[kind] = counted.get(kind, 0) + 1
    return counted


def locate(client: redis.Redis, missing: list[int]) -> dict[str, str]:
    """Where in the broker each lost job's payload is, if anywhere readable."""
    if not missing:
        return {}
    needles = {n: re.compile(rb'"args":\[%d[,\]]' % n) for n in missing}
    readers = {
        b"list": lambda k: client.lrange(k, 0, -1),
        b"zset": lambda k: client.zrange(k, 0, -1),
        b"set": lambda k: client.smembers(k),
        b"hash": lambda k: client.hvals(k),
        b"string": lambda k: [client.get(k) or b""],
    }
    found: dict[int, str] = {}
    for name in client.scan_iter(count=1000):
        reader = readers.get(client.type(name))
        for value in reader(name) if reader else []:
            for n, needle in needles.items():
                if n not in found and needle.search(value):
                    found[n] = name.decode(errors="replace")
    return {str(n): found.get(n, "nowhere readable") for n in missing}


def batch_index(client: redis.Redis) -> dict[str, int]:
    """The ``batches`` index: its members, and how many name a batch whose hash is gone."""
    bids = [bid.decode() for bid in client.zrange("batches", 0, -1)]
    pipe = client.pipeline(transaction=False)
    for bid in bids:
        pipe.exists(f"b-{bid}")
    gone = sum(1 for exists in pipe.execute() if not exists)
    return {"members": len(bids), "members_whose_batch_expired": gone}


def dead_and_retry(client: redis.Redis) -> dict[str, Any]:
    """What ended in the dead or retry set (nothing should), the first few with their errors."""
    found: dict[str, Any] = {}
    for name in ("dead", "retry", "schedule"):
        entries = client.zrange(name, 0, 4)
        found[name] = {"size": int(client.zcard(name)), "first": [_brief(raw) for raw in entries]}
    return found


def _brief(raw: bytes) -> dict[str, Any]:
    try:
        job = json.loads(raw)
    except ValueError:
        return {"raw": raw[:200].decode(errors="replace")}
    return {k: job.get(k) for k in ("class", "args", "error_class", "error_message", "retry_count")}


def swarm_restarts(log: Path) -> dict[str, int]:
    """The swarm parent's respawns, from its log."""
    text = log.read_text(errors="replace") if log.exists() else ""
    return {"respawned": len(re.findall(r"swarm: child \d+ started", text)) - 2}


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python bench/soak", description=__doc__.split("\n")[0])
    parser.add_argument(
        "--short", action="store_true", help="the CI form: 5,000 jobs, a fault every 3 s, under a minute"
    )
    parser.add_argument("--jobs", type=int, help="jobs to push (default 1,000,000; --short 5,000)")
    parser.add_argument("--rate", type=float, help="pushes per second (default 500; --short 250)")
    parser.add_argument("--fault-every", type=float, help="seconds between faults (default 60; --short 3)")
    parser.add_argument("--faults", default="", help="comma-separated subset of the rotation: " + ",".join(ROTATION))
    parser.add_argument("--concurrency", type=int, default=5, help="threads per swarm child (default 5)")
    parser.add_argument(
        "--block", type=int, help="jobs per block; each block has one batch (default 1,000; --short 250)"
    )
    parser.add_argument("--linger", type=int, help="seconds a batch is kept after success (default 60; --short 5)")
    parser.add_argument("--unique-for", type=int, help="unique jobs' lock TTL, seconds (default 120; --short 30)")
    parser.add_argument("--scheduler", choices=("reliable", "default"), default="reliable")
    parser.add_argument("--sample-every", type=float, help="seconds between memory samples (default 5; --short 1)")
    parser.add_argument(
        "--warmup", type=float, help="seconds of a process's life before its memory is judged (default 120; --short 8)"
    )
    parser.add_argument(
        "--settle", type=float, help="seconds to wait at the end for TTLs to run out (default 660; --short 10)"
    )
    parser.add_argument("--drain-timeout", type=float, help="give up waiting for jobs after this long without progress")
    parser.add_argument("--output", help="JSON path (default bench/results/soak-<date>.json)")
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("--keep", action="store_true", help="keep the run's directory (logs, AOF)")
    args = parser.parse_args(argv)
    for name, value in (SHORT if args.short else FULL).items():
        if getattr(args, name, None) is None:
            setattr(args, name, value)
    if args.block % 10:
        parser.error("--block must be a multiple of 10 (each block's batch takes the jobs whose number ends in 0)")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    soak = Soak(args)
    commit = _commit()  # the code that runs, taken before a long run lets the checkout move on
    print(
        f"soak: {args.jobs} jobs at {args.rate:g}/s, a fault every {args.fault_every:g} s; work dir {soak.dir}",
        flush=True,
    )
    try:
        result = soak.run()
    finally:
        soak.close(args.keep)
    document = {
        "command": "python bench/soak " + " ".join(sys.argv[1:] if argv is None else argv),
        "when": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
            "host": socket.gethostname(),
        },
        "commit": commit,
        "wurk": wurk.__version__,
        "server": f"valkey {soak.broker.version}",
        "settings": {name: getattr(args, name) for name in (*FULL, "concurrency", "scheduler", "faults")},
        **result,
    }
    document["verdict"] = report.verdict(document)
    print(report.summary(document))
    if not args.no_write:
        output = Path(args.output) if args.output else RESULTS / f"soak-{dt.date.today().isoformat()}.json"
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(json.dumps(document, indent=1) + "\n")
        print(f"\nwritten: {output}")
    return 0 if document["verdict"]["healthy"] else 1


def _commit() -> str:
    done = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True, check=False)
    return done.stdout.strip()
