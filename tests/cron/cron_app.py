"""The application the periodic-job worker tests run.

Loaded by real ``wurk`` workers (``-r tests.cron.cron_app``) with fast
elections (``worker_app``'s ``TEST_LEADER_*`` knobs). The cron poller ticks
every ``TEST_CRON_TICK`` seconds of real time, but reads the time from the
``test:clock`` key, so a test walks the cluster through simulated minutes:
each read is counted in ``clock-reads:<pid>`` (only a leader reads it), and
each run of a periodic job is recorded in ``ran`` as ``"<label> <jid>"``.
"""

from __future__ import annotations

import os

import redis

import tests.worker.worker_app  # noqa: F401  (its timing knobs)
import wurk
from tests.evidence import evidence_url
from wurk.config.configuration import Config

_clients: dict[int, redis.Redis] = {}


def evidence() -> redis.Redis:
    """One client per process (a forked child must not share its parent's)."""
    pid = os.getpid()
    if pid not in _clients:
        _clients[pid] = redis.Redis.from_url(evidence_url())
    return _clients[pid]


def simulated_clock() -> float:
    client = evidence()
    client.incr(f"clock-reads:{os.getpid()}")
    return float(client.get("test:clock") or 0)


class Tick(wurk.Job):
    def perform(self, label: str) -> None:
        evidence().rpush("ran", f"{label} {self.jid}")


@wurk.configure_server
def periodic_jobs(config: Config) -> None:
    config["cron_tick_interval"] = float(os.environ.get("TEST_CRON_TICK", "0.2"))
    config["cron_clock"] = simulated_clock

    @config.periodic
    def loops(mgr):
        mgr.register("* * * * *", Tick, args=["every"])
        mgr.register("*/2 * * * *", Tick, args=["even"])
