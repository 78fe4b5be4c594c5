"""The application the push-writer worker test runs: a plugin writer that
claims every payload carrying ``ledger`` and counts it as it writes it.

Loaded by real ``wurk`` worker processes (``-r tests.worker.writer_app``),
whose scheduled-job promoter must route a due ``ledger`` job through the
writer, with origin ``PROMOTE``. ``TEST_RELIABLE_SCHEDULER`` switches the
worker to the reliable promoter.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

import wurk
from tests.worker.worker_app import evidence
from wurk.client.writers import PushWriter
from wurk.redis.connection import RedisPool


class LedgerWriter(PushWriter):
    """Pushes as core would and counts, per origin, in the same transaction."""

    name = "ledger"

    def claims(self, payload: dict[str, Any], origin: str) -> bool:
        return "ledger" in payload and payload.get("at") is None

    def write(self, payloads: list[dict[str, Any]], pool: RedisPool, origin: str) -> None:
        now = int(time.time() * 1000)

        def push(conn: Any) -> None:
            pipe = conn.pipeline(transaction=True)
            for payload in payloads:
                payload["enqueued_at"] = now
                pipe.sadd("queues", payload["queue"])
                pipe.lpush(f"queue:{payload['queue']}", json.dumps(payload))
                pipe.hincrby(f"ledger:{payload['ledger']}", origin, 1)
            pipe.execute()

        pool.execute(push)


@wurk.hookimpl
def wurk_register_push_writers(writers: Any, config: Any) -> None:
    writers.add(LedgerWriter())


@wurk.configure_server
def tune(config: wurk.Config) -> None:
    config["poll_interval_average"] = 0.2
    config["heartbeat_interval"] = 0.5
    if os.environ.get("TEST_RELIABLE_SCHEDULER"):
        config.reliable_scheduler()
    config.plugins.register(sys.modules[__name__], name="ledger-writer")


class Booked(wurk.Job):
    def perform(self, key: str) -> None:
        evidence().hincrby("executions", key, 1)
