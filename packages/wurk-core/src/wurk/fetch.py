"""Reliable fetch: the only way Wurk takes a job off a queue.

Every fetch *moves* a job from the tail of its public queue onto this
process's private list for that queue (``queue:<q>|<host>|<pid>|<nonce>|0``),
atomically, and the job leaves the private list only when it is acknowledged
(``LREM``). At every instant a job is in exactly one public queue or one
private list, so a process killed mid-job loses nothing: the reaper of a live
process moves its private lists back.

To spend as few round trips as possible, one ``core.fetch`` script call claims
as many jobs as there are threads waiting for work — and, while jobs take
only milliseconds, up to one per thread more — and the acknowledgements
gathered since the last call travel in the same pipeline. Only when every
served queue is empty does a thread block, with ``BLMOVE`` on one queue for
``fetch_poll_interval`` seconds (Redis has no multi-key ``BLMOVE``), after
sending any pending acknowledgements. Claimed jobs no thread has started yet
wait in a small local buffer; they are in the private list too, and go back
to their queue at shutdown with the rest.
"""

from __future__ import annotations

import collections
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from redis.exceptions import RedisError

from wurk import keys
from wurk.errors import RedisConnectionError

if TYPE_CHECKING:
    from wurk.capsule import Capsule
    from wurk.identity import ProcessIdentity

PAUSED_CACHE_SECONDS = 1.0
DEFAULT_POLL_INTERVAL = 2.0


@dataclass(eq=False)
class UnitOfWork:
    """One fetched job: its queue name, its exact JSON, and where it is parked."""

    queue: str
    job: str
    private: str
    fetcher: ReliableFetcher

    def acknowledge(self) -> None:
        self.fetcher.acknowledge(self)


class Fetcher(Protocol):
    """What a custom ``config["fetch_class"]`` must provide."""

    def retrieve_work(self) -> UnitOfWork | None: ...

    def acknowledge(self, uow: UnitOfWork) -> None: ...

    def flush_acks(self) -> None: ...

    def requeue(self, units: list[UnitOfWork]) -> int: ...

    def requeue_all(self) -> int: ...


class ReliableFetcher:
    """Claims and acknowledges the jobs of one capsule in one process."""

    def __init__(self, capsule: Capsule, identity: ProcessIdentity) -> None:
        self.capsule = capsule
        self.config = capsule.config
        self.identity = identity
        self.scripts = capsule.config.scripts
        self.pool = capsule.fetch_redis_pool
        self.poll_interval = float(self.config.option("fetch_poll_interval", DEFAULT_POLL_INTERVAL))
        self._names = list(capsule.weights)
        self._expanded = capsule.queues
        self._mode = capsule.mode
        self._private = {name: identity.private_queue(name) for name in self._names}
        self._local: collections.deque[UnitOfWork] = collections.deque()
        self._acks: list[UnitOfWork] = []
        self._lock = threading.Lock()
        self._waiting = 0
        self._paused: frozenset[str] = frozenset()
        self._paused_at = 0.0
        self._suspect = False
        #: Every claimed job not yet acknowledged or given back, as (private
        #: list, job): what a reconcile must leave where it is.
        self._outstanding: set[tuple[str, str]] = set()
        self._turns = threading.Condition(self._lock)
        self._claims = 0
        self._reconciling = False
        #: How many jobs to claim beyond the threads waiting right now; the
        #: manager raises it while jobs are short, when claiming one job per
        #: round trip would leave the threads waiting on Redis.
        self.prefetch: Callable[[], int] = lambda: 0

    # -- order and pause ------------------------------------------------------

    def queue_order(self) -> list[str]:
        """The queues in the order this fetch tries them."""
        if self._mode == "strict":
            return list(self._names)
        if self._mode == "random":
            order = list(self._names)
            random.shuffle(order)
            return order
        expanded = list(self._expanded)
        random.shuffle(expanded)
        return list(dict.fromkeys(expanded))

    def _paused_queues(self, conn: Any) -> frozenset[str]:
        now = time.monotonic()
        if now - self._paused_at > PAUSED_CACHE_SECONDS:
            members = conn.smembers(keys.PAUSED)
            self._paused = frozenset(m.decode() if isinstance(m, bytes) else m for m in members)
            self._paused_at = now
        return self._paused

    # -- fetching ---------------------------------------------------------------

    def retrieve_work(self) -> UnitOfWork | None:
        """The next job, or ``None`` after ``fetch_poll_interval`` with none."""
        with self._lock:
            if self._local:
                return self._local.popleft()
            self._waiting += 1
            wanted = min(self.capsule.concurrency, self._waiting + self.prefetch())
        try:
            if self._suspect:
                self._reconcile()
            self._begin_claim()
            try:
                return self._fetch(wanted)
            finally:
                self._end_claim()
        except (RedisError, RedisConnectionError):
            self._suspect = True  # a claim may have happened whose reply we lost
            raise
        finally:
            with self._lock:
                self._waiting -= 1

    def _begin_claim(self) -> None:
        with self._turns:
            while self._reconciling:
                self._turns.wait()
            self._claims += 1

    def _end_claim(self) -> None:
        with self._turns:
            self._claims -= 1
            self._turns.notify_all()

    def _fetch(self, wanted: int) -> UnitOfWork | None:
        order = self.queue_order()
        fetch_keys = [keys.PAUSED]
        for name in order:
            fetch_keys += [keys.queue(name), self._private[name]]
        acks = self._take_acks()

        def claim(conn: Any) -> Any:
            pipe = conn.pipeline(transaction=False)
            for uow in acks:
                pipe.lrem(uow.private, 1, uow.job)
            self.scripts.queue("core.fetch", pipe, fetch_keys, [wanted])
            return pipe.execute()[-1]

        try:
            claimed = self.pool.execute(claim)
        except BaseException:
            self._restore_acks(acks)
            raise
        self._settled(acks)
        if claimed:
            return self._keep(order, claimed)
        return self._block(order)

    def _keep(self, order: list[str], claimed: list[Any]) -> UnitOfWork:
        units = []
        for index in range(0, len(claimed), 2):
            name = order[int(claimed[index]) - 1]
            job = claimed[index + 1]
            units.append(UnitOfWork(name, job.decode() if isinstance(job, bytes) else job, self._private[name], self))
        first, rest = units[0], units[1:]
        with self._lock:
            self._outstanding.update((uow.private, uow.job) for uow in units)
            self._local.extend(rest)
        return first

    def _block(self, order: list[str]) -> UnitOfWork | None:
        """Every queue is empty: wait on the first unpaused one."""
        self.flush_acks()
        conn = self.pool.client
        paused = self._paused_queues(conn)
        candidates = [name for name in order if name not in paused]
        if not candidates:
            time.sleep(self.poll_interval)
            return None
        name = candidates[0]
        job = self.pool.execute(
            lambda c: c.blmove(keys.queue(name), self._private[name], self.poll_interval, "RIGHT", "LEFT")
        )
        if job is None:
            return None
        uow = UnitOfWork(name, job.decode() if isinstance(job, bytes) else job, self._private[name], self)
        with self._lock:
            self._outstanding.add((uow.private, uow.job))
        return uow

    # -- acknowledging ------------------------------------------------------------

    def acknowledge(self, uow: UnitOfWork) -> None:
        """Queue the ``LREM``; it travels with the next fetch, or ``flush_acks``."""
        with self._lock:
            self._acks.append(uow)

    def _take_acks(self) -> list[UnitOfWork]:
        with self._lock:
            acks, self._acks = self._acks, []
        return acks

    def _restore_acks(self, acks: list[UnitOfWork]) -> None:
        with self._lock:
            self._acks[:0] = acks

    def _settled(self, units: list[UnitOfWork]) -> None:
        """These jobs have left the private list: stop tracking them."""
        if units:
            with self._lock:
                self._outstanding.difference_update((uow.private, uow.job) for uow in units)

    def flush_acks(self) -> None:
        acks = self._take_acks()
        if not acks:
            return

        def remove(conn: Any) -> None:
            pipe = conn.pipeline(transaction=False)
            for uow in acks:
                pipe.lrem(uow.private, 1, uow.job)
            pipe.execute()

        try:
            self.pool.execute(remove)
        except BaseException:
            self._restore_acks(acks)
            raise
        self._settled(acks)

    # -- giving jobs back ---------------------------------------------------------

    def requeue(self, units: list[UnitOfWork]) -> int:
        """Give specific claimed jobs back to the tail of their queues (fetched next)."""
        moved = 0
        conn = self.pool.client
        for uow in units:
            moved += int(self.scripts.call("core.requeue", conn, [uow.private, keys.queue(uow.queue)], [uow.job]))
        self._settled(units)
        return moved

    def unstarted(self) -> list[UnitOfWork]:
        """Claimed jobs no thread has started (taken out of the local buffer)."""
        with self._lock:
            units, self._local = list(self._local), collections.deque()
        return units

    def requeue_all(self) -> int:
        """Give every job still in this process's private lists back to its queue.

        Called at shutdown once acknowledgements are flushed, so what is left
        is unfinished work: running past the deadline, or claimed and unstarted.
        """
        self.unstarted()
        self.flush_acks()
        moved = self._requeue_leftovers(keep=set())
        with self._lock:
            self._outstanding.clear()
        return moved

    def _requeue_leftovers(self, keep: set[tuple[str, str]]) -> int:
        moved = 0
        conn = self.pool.client
        for name, private in self._private.items():
            jobs = [j.decode() if isinstance(j, bytes) else j for j in conn.lrange(private, 0, -1)]
            leftovers = [job for job in jobs if (private, job) not in keep]
            if leftovers:
                # Newest claim first, so the oldest ends up at the queue's tail
                # and is fetched first again.
                moved += int(self.scripts.call("core.requeue", conn, [private, keys.queue(name)], leftovers))
        return moved

    def abandon(self, uow: UnitOfWork) -> None:
        """A job that was neither finished nor booked (the retry layer could not
        reach Redis): it is still in the private list, and the next claim gives
        it back to its queue (the reaper would not: this process is alive)."""
        self._settled([uow])
        self._suspect = True

    def _reconcile(self) -> None:
        """Give back every job in our private lists that no thread holds: a claim
        whose reply was lost, or an abandoned job. No claim runs meanwhile, so
        nothing in transit is mistaken for a leftover."""
        with self._turns:
            if self._reconciling:
                return
            self._reconciling = True
            while self._claims:
                self._turns.wait()
        try:
            with self._lock:
                keep = set(self._outstanding)
            self._requeue_leftovers(keep)
            self._suspect = False
        finally:
            with self._turns:
                self._reconciling = False
                self._turns.notify_all()
