"""The job every Python library under test runs, and each library's objects.

Workers import this module (``wurk -r chaos.jobs``, ``rq worker`` with
``chaos.jobs.rq_job``, ``dramatiq chaos.jobs``, ``celery -A chaos.jobs``);
``CHAOS_LIB`` says which library's objects to build, so a worker imports
only its own library. Every library runs the same body, :func:`run`, with
the same arguments: the driver's key for the job, how long it takes, and
whether it crashes its process.

A crash is ``os._exit``: no exception, no ``finally``, no chance for the
library to book anything, as when a C extension segfaults or the kernel's
OOM killer strikes. ``crash1`` crashes on the job's first run only (a
transient crash: the job must still run to the end once); ``crash`` crashes
on every run (a poison pill: a library should stop retrying it, and the jobs
beside it must not suffer).
"""

from __future__ import annotations

import os
import time
from typing import Any

from chaos import ledger

LIB = os.environ.get("CHAOS_LIB", "")


def run(key: str, ms: int = 0, mode: str = "") -> None:
    attempt = ledger.started(key)
    if mode == "crash" or (mode == "crash1" and attempt == 1):
        os._exit(3)
    if ms:
        time.sleep(ms / 1000)
    ledger.ended(key, attempt)


def _broker_url() -> str:
    return os.environ["CHAOS_BROKER_URL"]


if LIB == "wurk":
    import wurk

    class ChaosJob(wurk.Job):
        """The chaos job under Wurk; retried like any job if it raised (it does not)."""

        def perform(self, key: str, ms: int = 0, mode: str = "") -> None:
            run(key, ms, mode)

    class ChaosCron(wurk.Job):
        """One run per cron tick; its key is its jid, so a tick pushed twice shows as two keys."""

        def perform(self) -> None:
            run(f"cron-{self.jid}")

    @wurk.configure_server
    def _configure(config: Any) -> None:
        # The scheduler polls every second, so that promotions happen during
        # every fault window rather than once or twice.
        config["poll_interval_average"] = 1.0
        # Wurk's documented setting for a scheduler that loses nothing when a
        # process dies between taking a due job and pushing it (the default
        # promoter's window, which the guides keep as Sidekiq's default).
        # CHAOS_SCHEDULER=default measures that window instead.
        if os.environ.get("CHAOS_SCHEDULER", "reliable") == "reliable":
            config.reliable_scheduler()
        if os.environ.get("CHAOS_CRON"):
            # The poller looks every 5 s instead of every minute, so a tick
            # fires within seconds of its minute, inside the fault window.
            config["cron_tick_interval"] = 5.0
            config.periodic(lambda mgr: mgr.register("* * * * *", ChaosCron))

elif LIB == "rq":
    from redis import Redis

    def rq_job(key: str, ms: int = 0, mode: str = "") -> None:
        run(key, ms, mode)

    def rq_connection() -> Redis:
        return Redis.from_url(_broker_url())

elif LIB == "dramatiq":
    import dramatiq
    from dramatiq.brokers.redis import RedisBroker

    broker = RedisBroker(url=_broker_url())
    dramatiq.set_broker(broker)

    @dramatiq.actor(actor_name="chaos_job", max_retries=20)
    def dramatiq_job(key: str, ms: int = 0, mode: str = "") -> None:
        run(key, ms, mode)

elif LIB == "celery":
    from celery import Celery

    app = Celery("chaos", broker=_broker_url(), set_as_current=True)
    app.conf.update(
        # The settings Celery documents for at-least-once delivery on Redis:
        # acknowledge after the task ran, give a task back when the process
        # running it dies, take one task at a time, and have Redis hand an
        # unacknowledged task to another worker after the visibility timeout
        # (longer than any countdown used here, as the documentation asks).
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        broker_transport_options={"visibility_timeout": 60},
        broker_connection_retry_on_startup=True,
        worker_hijack_root_logger=False,
    )

    @app.task(name="chaos.job")
    def celery_job(key: str, ms: int = 0, mode: str = "") -> None:
        run(key, ms, mode)
