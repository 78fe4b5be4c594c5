"""The scheduler: moves due jobs from ``retry`` and ``schedule`` onto their queues.

One poller thread per process. Its interval is random around
``process count × average_scheduled_poll_interval`` seconds, so the whole
fleet's scheduler traffic stays about constant as processes are added, and
it first waits ``scheduler_initial_wait`` (10 s) plus a little jitter, so a
fleet-wide deploy does not dogpile Redis.

Two promoters:

* :class:`Enq`, the default, pops one due job at a time with an atomic script
  and pushes it through the client (client middleware runs, ``enqueued_at``
  is fresh). Between the pop and the push the job is only in this process's
  memory: a crash there loses it, and a failed push is reported with context
  ``scheduler_promote``.
* :class:`ReliableEnq` (``config.reliable_scheduler()``) promotes in one
  script that pushes before it removes, 500 jobs per call: a crash can at
  worst deliver a job twice.
"""

from __future__ import annotations

import random
import time
from typing import TYPE_CHECKING, Any

from wurk import keys
from wurk import payload as wire
from wurk.client import Client
from wurk.component import Component

if TYPE_CHECKING:
    from wurk.config import Config

SORTED_SETS = (keys.RETRY, keys.SCHEDULE)
PROMOTE_BATCH = 500
INITIAL_JITTER = 5.0
CLEANUP_LOCK_SECONDS = 60


class Enq:
    def __init__(self, config: Config) -> None:
        self.config = config
        self.client = Client(config)
        self.done = False

    def enqueue_jobs(self, sorted_sets: tuple[str, ...] = SORTED_SETS) -> int:
        moved = 0
        for sorted_set in sorted_sets:
            while not self.done:
                member = self._pop_due(sorted_set)
                if member is None:
                    break
                self._push(member.decode() if isinstance(member, bytes) else member)
                moved += 1
        return moved

    def _pop_due(self, sorted_set: str) -> bytes | str | None:
        """Remove and return one member of ``sorted_set`` that is due now."""
        return self.config.redis_pool.execute(
            lambda conn: self.config.scripts.call("core.zpopbyscore", conn, [sorted_set], [repr(time.time())])
        )

    def _push(self, member: str) -> None:
        try:
            self.client.push(wire.loads(member))
        except Exception as exc:
            self.config.handle_exception(exc, {"context": "scheduler_promote", "job": member})


class ReliableEnq(Enq):
    def enqueue_jobs(self, sorted_sets: tuple[str, ...] = SORTED_SETS) -> int:
        moved = 0
        for sorted_set in sorted_sets:
            while not self.done:
                count = self._promote_due(sorted_set)
                moved += count
                if count < PROMOTE_BATCH:
                    break
        return moved

    def _promote_due(self, sorted_set: str) -> int:
        """Move up to ``PROMOTE_BATCH`` due members of ``sorted_set`` onto their queues; how many."""
        now = time.time()
        return int(
            self.config.redis_pool.execute(
                lambda conn: self.config.scripts.call(
                    "core.promote", conn, [sorted_set, keys.QUEUES], [repr(now), int(now * 1000), PROMOTE_BATCH]
                )
            )
        )


class Poller(Component):
    name = "wurk-scheduler"
    context = "scheduler"

    def __init__(self, config: Config) -> None:
        super().__init__(config)
        self.enq: Enq = ReliableEnq(config) if config.option("scheduled_enq") == "reliable" else Enq(config)
        self._cleaned = False

    def quiet(self) -> None:
        """A quiet process promotes nothing more: its jobs would run elsewhere
        anyway, and the promotion is the one write that can lose a job."""
        self.request_stop()

    def wake(self) -> None:
        self.enq.done = True

    def first_wait(self) -> float:
        return self.initial_wait()

    def next_wait(self) -> float:
        return self.random_interval()

    def tick(self) -> None:
        if not self._cleaned:
            self._cleaned = True
            self.cleanup_processes()
        self.enq.enqueue_jobs()

    def average(self) -> float:
        configured = self.config.option("poll_interval_average")
        if configured:
            return float(configured)
        count = max(self._process_count(), 1)
        return count * float(self.config.option("average_scheduled_poll_interval", 5))

    def _process_count(self) -> int:
        try:
            return int(self.config.redis_pool.execute(lambda conn: conn.scard(keys.PROCESSES)))
        except Exception:
            return 1

    def initial_wait(self) -> float:
        configured = self.config.option("poll_interval_average")
        base = 0.0 if configured else float(self.config.option("scheduler_initial_wait", 10))
        return base + random.uniform(0, min(INITIAL_JITTER, self.average()))

    def random_interval(self) -> float:
        average = self.average()
        if self._process_count() < 10:
            return random.uniform(average / 2, average * 1.5)
        return random.uniform(0, average * 2)

    def cleanup_processes(self) -> int:
        """Drop ``processes`` members whose heartbeat hash expired (once a minute, fleet-wide)."""
        try:
            return cleanup_processes(self.config.redis_pool.client)
        except Exception as exc:
            self.config.handle_exception(exc, {"context": "process cleanup"})
            return 0


def cleanup_processes(conn: Any) -> int:
    if not conn.set(keys.PROCESS_CLEANUP, "1", nx=True, ex=CLEANUP_LOCK_SECONDS):
        return 0
    members = list(conn.sscan_iter(keys.PROCESSES))
    if not members:
        return 0
    pipe = conn.pipeline(transaction=False)
    for member in members:
        pipe.hget(member, "info")
    infos = pipe.execute()
    gone = [member for member, info in zip(members, infos, strict=True) if info is None]
    if gone:
        conn.srem(keys.PROCESSES, *gone)
    return len(gone)
