"""The producer: pushes a scenario's jobs at their planned moments, with the library's own call.

Run as ``python -m chaos.produce PLAN OUT`` in the library's virtualenv,
with ``CHAOS_LIB`` and ``CHAOS_BROKER_URL`` set. It goes through the same
faulted path as the workers (the proxy, the restarted server), because a
push is a write like any other: a push whose reply is lost must not be lost
or doubled either.

Each line of ``OUT`` is ``A <key>`` once a push returned (the library
*accepted* the job: from then on it owes one run) or ``R <key> <error>``
when it raised (the job may or may not exist; it is not counted as owed).
A refused push is not tried again: the driver judges the library on what it
promised, not on what a patient caller could have obtained.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

Push = Callable[[str, int, str, float], None]


def wurk_push(sidekiq: bool = False) -> Push:
    import wurk

    config = wurk.default_config()
    config.redis = {"url": os.environ["CHAOS_BROKER_URL"]}
    client = wurk.Client(config)

    def push(key: str, ms: int, mode: str, delay: float) -> None:
        # Ruby Sidekiq's workers run the class by name; Wurk's own by its import path.
        item: dict[str, Any] = {"class": "ChaosJob" if sidekiq else "chaos.jobs.ChaosJob", "args": [key, ms, mode]}
        if delay:
            item["at"] = time.time() + delay
        if client.push(item) is None:
            raise RuntimeError("push halted")

    return push


def rq_push() -> Push:
    from redis import Redis
    from rq import Queue, Retry

    queue = Queue("default", connection=Redis.from_url(os.environ["CHAOS_BROKER_URL"]))
    # RQ retries a job, and so recovers one abandoned by a dead worker, only
    # when it is enqueued with a Retry; the job timeout bounds how long an
    # abandoned job waits before the registry cleanup finds it.
    options = {"retry": Retry(max=3), "job_timeout": 10}

    def push(key: str, ms: int, mode: str, delay: float) -> None:
        if delay:
            queue.enqueue_in(timedelta(seconds=delay), "chaos.jobs.rq_job", key, ms, mode, **options)
        else:
            queue.enqueue("chaos.jobs.rq_job", key, ms, mode, **options)

    return push


def dramatiq_push() -> Push:
    from chaos.jobs import dramatiq_job

    def push(key: str, ms: int, mode: str, delay: float) -> None:
        dramatiq_job.send_with_options(args=(key, ms, mode), delay=int(delay * 1000) or None)

    return push


def celery_push() -> Push:
    from chaos.jobs import celery_job

    def push(key: str, ms: int, mode: str, delay: float) -> None:
        celery_job.apply_async((key, ms, mode), countdown=delay or None)

    return push


PUSHERS: dict[str, Callable[[], Push]] = {
    "wurk": wurk_push,
    "sidekiq": lambda: wurk_push(sidekiq=True),
    "rq": rq_push,
    "dramatiq": dramatiq_push,
    "celery": celery_push,
}


def main(plan_path: str, out_path: str) -> None:
    plan = json.loads(Path(plan_path).read_text(encoding="utf-8"))
    push = PUSHERS[os.environ["CHAOS_LIB"]]()
    origin = time.monotonic()
    with open(out_path, "a", buffering=1, encoding="utf-8") as out:
        for job in plan:
            wait = origin + job["at"] - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            try:
                push(job["key"], job["ms"], job["mode"], job["delay"])
            except Exception as exc:  # a refused push is data, not a crash of the producer
                out.write(f"R {job['key']} {type(exc).__name__}\n")
            else:
                out.write(f"A {job['key']}\n")
        out.write("DONE\n")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
