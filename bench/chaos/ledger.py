"""The ledger: a separate, never-faulted server where every job records each execution.

The broker is what the faults attack, so the evidence of what ran cannot
live there: a restart would take it along, a lost reply would hide it. Each
job writes to this second server instead, which no fault ever touches, two
events per execution:

* ``S|<key>|<attempt>|<pid>|<time>`` when it starts, where ``attempt`` is the
  number of times this key has started so far (counted here, by the ledger,
  so a run that the broker forgot still counts);
* ``E|<key>|<attempt>|<pid>|<time>`` when it ends without error.

``key`` is the driver's own name for the job (``j000042``), passed as the
job's first argument, so that every library is judged on the same names
whatever ids it gives its jobs. This module is imported by the workers of
every Python library under test, so it needs nothing but redis-py.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any

import redis

EVENTS = "ledger:events"
RUNS = "ledger:runs"
URL_ENV = "CHAOS_LEDGER_URL"

_clients: dict[int, redis.Redis] = {}


def _client() -> redis.Redis:
    """One connection per process: forking workers (RQ, Celery's prefork) must
    not share a socket with their parent."""
    pid = os.getpid()
    client = _clients.get(pid)
    if client is None:
        client = redis.Redis.from_url(os.environ[URL_ENV], socket_timeout=10)
        _clients.clear()
        _clients[pid] = client
    return client


def started(key: str) -> int:
    """Record that ``key`` starts in this process; its attempt number."""
    client = _client()
    attempt = int(client.hincrby(RUNS, key, 1))
    client.rpush(EVENTS, f"S|{key}|{attempt}|{os.getpid()}|{time.time():.6f}")
    return attempt


def ended(key: str, attempt: int) -> None:
    """Record that ``key``'s run number ``attempt`` finished."""
    _client().rpush(EVENTS, f"E|{key}|{attempt}|{os.getpid()}|{time.time():.6f}")


@dataclass
class Execution:
    """One run of a job: where and when it started, and when it ended (None: it never did)."""

    key: str
    attempt: int
    pid: int
    start: float
    end: float | None = None


@dataclass
class Ledger:
    """What the ledger holds, read back by the driver after a scenario."""

    runs: dict[str, list[Execution]] = field(default_factory=dict)

    @classmethod
    def read(cls, client: redis.Redis) -> Ledger:
        ledger = cls()
        open_runs: dict[tuple[str, int], Execution] = {}
        for raw in client.lrange(EVENTS, 0, -1):
            kind, key, attempt, pid, at = raw.decode().split("|")
            if kind == "S":
                run = Execution(key, int(attempt), int(pid), float(at))
                ledger.runs.setdefault(key, []).append(run)
                open_runs[(key, int(attempt))] = run
            elif (key, int(attempt)) in open_runs:
                open_runs[(key, int(attempt))].end = float(at)
        for runs in ledger.runs.values():
            runs.sort(key=lambda run: run.start)
        return ledger

    def completed(self) -> set[str]:
        return {key for key, runs in self.runs.items() if any(run.end is not None for run in runs)}

    def executions(self) -> int:
        return sum(len(runs) for runs in self.runs.values())

    def as_json(self) -> dict[str, Any]:
        return {"keys": len(self.runs), "executions": self.executions(), "completed": len(self.completed())}
