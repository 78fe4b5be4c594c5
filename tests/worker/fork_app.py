"""A process that forks itself, for ``test_fork``: run as a subprocess so that
pytest's own process (its server, its threads) is never forked.

The parent builds a configuration, uses every kind of pool it has (a push on
the main pool, a claim through a capsule's fetch pool with its waiters left
blocked in Redis across the fork, the web pool, a custom pool, a Lua script,
statsd), an event loop with a live thread and an outage buffer holding a job,
and keeps a thread writing through the main pool and another logging through
Wurk's log handler (to ``LOG_FILE``) while it forks two children. Each child
checks that none of the parent's connections came along, counts on its own
key concurrently with the parent, runs a coroutine on the inherited loop
runner, logs ``LOG_LINES`` lines, and runs the queued jobs (``async def``
ones among them) in an embedded worker. Everything the test asserts on is
left in Redis, in the log file or printed as one JSON line; the test's UDP
socket receives the statsd packets.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
import time
import traceback
from typing import Any

import wurk
import wurk_web
from wurk.config.configuration import Config
from wurk.redis.connection import RedisPool
from wurk.server.fetch import ReliableFetcher
from wurk.server.identity import ProcessIdentity
from wurk.server.logger import build_logger
from wurk.server.loop import LoopRunner

JOBS = 30
ASYNC_JOBS = 10
LOG_LINES = 200
INCRS = 1000
CHILDREN = 2
DEADLINE = 60.0


class Tally(wurk.Job):
    def perform(self, number: int) -> None:
        conn = wurk.default_config().redis_pool.client
        conn.hincrby("done", str(number), 1)
        conn.sadd("job_pids", os.getpid())


class AsyncTally(wurk.Job):
    async def perform(self, number: int) -> None:
        import asyncio

        await asyncio.sleep(0.001)
        conn = wurk.default_config().redis_pool.client
        conn.hincrby("async_done", str(number), 1)
        conn.sadd("async_pids", os.getpid())


async def whose_loop() -> str:
    """Which process and thread run the coroutine: the loop must be the caller's own."""
    return f"{os.getpid()} {threading.current_thread().name} {threading.current_thread().ident}"


class UdpStats:
    """A statsd client in miniature: each packet names the metric, the pid
    that built the client and the pid that sent it. ``close_socket`` is
    DogStatsD's name for letting go of the socket without sending."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.creator = os.getpid()
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)

    def _send(self, metric: str) -> None:
        self.sock.sendto(f"{metric}|{self.creator}|{os.getpid()}".encode(), ("127.0.0.1", self.port))

    def incr(self, metric: str) -> None:
        self._send(metric)

    def timing(self, metric: str, ms: float) -> None:
        self._send(metric)

    def close_socket(self) -> None:
        self.sock.close()


class ForkPlugin:
    """Records, in Redis, in which process each fork hook ran."""

    @wurk.hookimpl
    def wurk_before_fork(self, config: Config) -> None:
        config.redis_pool.client.rpush("plugin_events", f"before_fork:{os.getpid()}")

    @wurk.hookimpl
    def wurk_fork(self, config: Config) -> None:
        config.redis_pool.client.rpush("plugin_events", f"fork:{os.getpid()}")


def every_pool(config: Config) -> list[RedisPool]:
    return config._custom_pools  # the dashboard's shared pool among them


def child(config: Config, index: int, custom: RedisPool, parent_stats: UdpStats, runner: LoopRunner) -> int:
    conn = config.redis_pool.client
    assert len(config.reliable_push()) == 0, "the child kept the parent's buffered jobs"
    conn.rpush("loops", runner.run(whose_loop()))  # the inherited runner's loop thread is not here
    for number in range(LOG_LINES):
        config.logger.info("child %s line %s", os.getpid(), number)
    stale = [
        pool.name
        for pool in every_pool(config)
        for connection in pool.connection_pool._connections
        if connection.pid != os.getpid()
    ]
    assert not stale, f"pools still holding the parent's connections: {stale}"
    assert parent_stats.sock.fileno() == -1, "the child kept its copy of the parent's statsd socket"
    assert config.statsd is not parent_stats
    for _ in range(INCRS):
        conn.incr(f"child:{index}")
    wurk_web.redis_pool(config).client.incr("web_child")
    custom.client.incr("custom")
    config.statsd_increment("child.ready")
    instance = wurk.configure_embed(lambda cfg: cfg.update({"queues": ["default"]}), config=config)
    instance.run()
    assert instance.launcher is not None
    conn.rpush("identities", json.dumps([instance.launcher.identity.pid, os.getpid()]))
    deadline = time.monotonic() + DEADLINE
    while (
        len(conn.hgetall("done")) < JOBS or len(conn.hgetall("async_done")) < ASYNC_JOBS
    ) and time.monotonic() < deadline:
        time.sleep(0.05)
    instance.stop()
    return 0


def hammer(config: Config, stop: threading.Event, counts: dict[str, Any]) -> None:
    """Keep the main pool busy so that the fork happens mid-conversation."""
    conn = config.redis_pool.client
    try:
        while not stop.is_set():
            conn.incr("parent_bg")
            counts["parent_bg"] += 1
    except Exception:
        counts["errors"].append(traceback.format_exc())


def chatter(config: Config, stop: threading.Event, counts: dict[str, Any]) -> None:
    """Log without pause, so that the fork happens while a line is being written."""
    try:
        while not stop.is_set():
            config.logger.info("parent line %s", counts["parent_lines"])
            counts["parent_lines"] += 1
    except Exception:
        counts["errors"].append(traceback.format_exc())


def idle_fetch(fetcher: ReliableFetcher, stop: threading.Event, counts: dict[str, Any]) -> None:
    """An idle processor: its waiters sit blocked in Redis on the probe queue."""
    try:
        while not stop.is_set():
            fetcher.retrieve_work()
    except Exception:
        counts["errors"].append(traceback.format_exc())


def main() -> int:
    config = wurk.Config()
    config.redis = {"url": os.environ["REDIS_URL"]}
    wurk.set_default_config(config)
    config.update({"heartbeat_interval": 0.3, "poll_interval_average": 0.2, "fetch_poll_interval": 0.5})
    config.dogstatsd = lambda: UdpStats(int(os.environ["STATSD_PORT"]))
    config.on("before_fork", lambda: config.redis_pool.client.rpush("events", f"before_fork:{os.getpid()}"))
    config.on("fork", lambda: config.redis_pool.client.rpush("events", f"fork:{os.getpid()}"))
    config.plugins.register(ForkPlugin(), name="fork-test")
    config.logger = build_logger(os.environ["LOG_FILE"])
    runner = LoopRunner()
    parent_loop = runner.run(whose_loop())  # its thread is alive at the fork
    buffer = config.reliable_push()
    # A job held for replay, as an outage would leave it: the parent's to
    # replay (at its next push), never a child's too.
    held = {"class": "Held", "args": [], "jid": "held", "queue": "held"}
    client = config.redis_pool.client
    buffer._items.append((held, lambda jobs: client.rpush("held", *[json.dumps(job) for job in jobs]), None))
    probe = config.capsule("probe", queues=["probe"], concurrency=1)

    # Every pool in use before the fork.
    conn = config.redis_pool.client
    for number in range(JOBS):
        Tally.perform_async(number)
    for number in range(ASYNC_JOBS):
        AsyncTally.perform_async(number)
    Tally.set(queue="probe").perform_async(-1)
    fetcher = ReliableFetcher(probe, ProcessIdentity.current())
    claimed = fetcher.retrieve_work()  # the claim is a Lua script on the fetch pool
    assert claimed is not None, "the probe job was not claimed"
    fetcher.acknowledge(claimed)
    fetcher.flush_acks()
    wurk_web.redis_pool(config).client.set("web", "parent")
    custom = config.new_redis_pool(2, "custom")
    custom.client.incr("custom")
    config.statsd_increment("parent.ready")
    parent_stats = config.statsd

    counts: dict[str, Any] = {"parent_bg": 0, "parent_lines": 0, "errors": []}
    stop = threading.Event()
    threads = [
        threading.Thread(target=hammer, args=(config, stop, counts)),
        threading.Thread(target=idle_fetch, args=(fetcher, stop, counts)),
        threading.Thread(target=chatter, args=(config, stop, counts)),
    ]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + DEADLINE
    while not fetcher.waiters.pools and time.monotonic() < deadline:
        time.sleep(0.01)  # wait for the waiters, so one is blocked at the fork
    time.sleep(0.2)

    sys.stdout.flush()
    children = []
    for index in range(CHILDREN):
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                code = child(config, index, custom, parent_stats, runner)
            except BaseException:
                traceback.print_exc()
                sys.stderr.flush()
            finally:
                os._exit(code)
        children.append(pid)

    # The parent goes on with the same pool objects, concurrently with the children.
    for _ in range(INCRS):
        conn.incr("parent")
    Tally.set(queue="parent_only").perform_async("after")
    after = {
        "queued": conn.llen("queue:parent_only"),
        "web": wurk_web.redis_pool(config).client.get("web").decode(),
        "custom": custom.client.incr("custom_parent"),
    }
    config.statsd_increment("parent.after")

    exits = {}
    for pid in children:
        while pid not in exits and time.monotonic() < deadline:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                exits[pid] = os.waitstatus_to_exitcode(status)
            else:
                time.sleep(0.05)
    stop.set()
    for thread in threads:
        thread.join(10)
    fetcher.requeue_all()
    after["loop"] = runner.run(whose_loop()) == parent_loop  # the parent's loop still serves it
    summary = {"parent": os.getpid(), "parent_loop": parent_loop, "children": exits, "after": after, **counts}
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
