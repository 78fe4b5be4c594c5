"""Reliable fetch: the only way Wurk takes a job off a queue.

Every fetch *moves* a job from the tail of its public queue onto this
process's private list for that queue (``queue:<q>|<host>|<pid>|<nonce>|0``),
atomically, and the job leaves the private list only when it is acknowledged
(``LREM``). At every instant a job is in exactly one public queue or one
private list, so a process killed mid-job loses nothing: the reaper of a live
process moves its private lists back.

To spend as few round trips as possible, one ``core.fetch`` script call
carries the acknowledgements gathered since the last call and claims a job
for every idle thread — and, while jobs take only milliseconds, more ahead.
What this process holds in its private lists never exceeds twice its
concurrency: a bound on the jobs that a crash hands back to be run again, and
on the work a slow job's neighbours wait behind.

When every served queue is empty, idle threads wait here and *waiter*
threads block on the queues (``BLMOVE``, which has no multi-key form): with k
threads idle, up to k waiters on each queue, in ranks across the queues
within the bound (see :meth:`ReliableFetcher.waiter_plan`). A job pushed to
any queue is picked up at once, and a queue shared with other workers (a Ruby
Sidekiq, whose idle threads all block on every queue) is shared fairly. With
more queues than the bound allows claimers, the last waiters only watch their
queue and wake a thread to claim.

A claim whose reply is lost (a timeout, a dropped connection) is never
retried blindly: the fetcher becomes *suspect*, and before its next claim it
gives back every job in its private lists that no thread holds.

Jobs the reaper recovered from a dead process are *suspects* of its crash
(see :mod:`wurk.reaper`); the scripts mark them as running here while they
run, and one recovered twice runs alone, so that only a job that really was
running at a crash is counted towards a poison pill.
"""

from __future__ import annotations

import collections
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, cast

from redis.exceptions import RedisError

from wurk import keys
from wurk.payload import exact as text
from wurk.reaper import RECOVERY_TTL

if TYPE_CHECKING:
    from wurk.capsule import Capsule
    from wurk.identity import ProcessIdentity
    from wurk.redis_pool import RedisPool

PAUSED_CACHE_SECONDS = 1.0
DEFAULT_POLL_INTERVAL = 2.0
#: How long a waiter rests after a failed block or a suspect it had to give back.
WAITER_PAUSE = 0.25


@dataclass(eq=False)
class UnitOfWork:
    """One fetched job: its queue name, its exact JSON, and where it is parked."""

    queue: str
    job: str | bytes
    private: str
    fetcher: ReliableFetcher
    #: The id of a recovered job running under suspicion ("" for an ordinary one).
    suspect: str = ""
    #: A suspect recovered twice or more: nothing else runs in this process meanwhile.
    alone: bool = False

    def acknowledge(self) -> None:
        self.fetcher.acknowledge(self)


class Fetcher(Protocol):
    """What a custom ``config["fetch_class"]`` must provide; it is built as
    ``fetch_class(capsule, identity)``. :class:`wurk.testing.fetcher_contract.FetcherContract`
    is a test suite any implementation can run against a real server."""

    #: How many jobs to claim ahead of the idle threads; the manager sets it.
    prefetch: Callable[[], int]

    def retrieve_work(self) -> UnitOfWork | None:
        """The next job, or ``None`` after about ``fetch_poll_interval``."""
        ...

    def acknowledge(self, uow: UnitOfWork) -> None:
        """The job is done (or its failure booked): it may leave Redis."""
        ...

    def flush_acks(self) -> None:
        """Send any acknowledgement still held back."""
        ...

    def abandon(self, uow: UnitOfWork) -> None:
        """Neither done nor booked: give it back to its queue soon."""
        ...

    def requeue(self, units: list[UnitOfWork]) -> int:
        """Give these claimed jobs back to their queues now."""
        ...

    def quiet(self) -> None:
        """Claim nothing more (one-way); a blocked ``retrieve_work`` returns."""
        ...

    def requeue_all(self) -> int:
        """At shutdown: give back every job claimed and not acknowledged."""
        ...


class ReliableFetcher:
    """Claims and acknowledges the jobs of one capsule in one process."""

    def __init__(self, capsule: Capsule, identity: ProcessIdentity) -> None:
        self.capsule = capsule
        self.config = capsule.config
        self.identity = identity
        self.scripts = capsule.config.scripts
        self.pool = capsule.fetch_redis_pool
        self.poll_interval = float(self.config.option("fetch_poll_interval", DEFAULT_POLL_INTERVAL))
        self.limit = 2 * capsule.concurrency
        self._names = list(capsule.weights)
        self._expanded = capsule.queues
        self._mode = capsule.mode
        self._private = {name: identity.private_queue(name) for name in self._names}
        self._running_key = keys.running_suspects(identity.identity)
        self._local: collections.deque[UnitOfWork] = collections.deque()
        self._acks: list[UnitOfWork] = []
        self._lock = threading.Lock()
        #: Idle processor threads wait on this for a job a waiter claimed.
        self._work = threading.Condition(self._lock)
        #: A reconcile waits on this for claims to end, and claims for a reconcile.
        self._turns = threading.Condition(self._lock)
        #: Waiters wait on this for an idle thread with every queue empty.
        self._wake = threading.Condition(self._lock)
        #: The last claim found every queue empty: only then do waiters block.
        self._empty = False
        #: Jobs in this process's private lists, as far as it knows, plus the
        #: claims in flight: what the bound is checked against.
        self._held = 0
        self._idle = 0
        self._claims = 0
        self._reconciling = False
        self._suspect = False
        self._suspect_gen = 0
        self._alone: UnitOfWork | None = None
        self._unmark: list[str] = []
        #: Every claimed job not yet acknowledged or given back, by (private
        #: list, job): what a reconcile must leave where it is.
        self._outstanding: dict[tuple[str, str | bytes], UnitOfWork] = {}
        self._paused: frozenset[str] = frozenset()
        self._paused_at = 0.0
        self._stopping = threading.Event()
        self._waiters: list[threading.Thread] = []
        #: One connection per waiter, so a quiet can unblock each by client id.
        self._block_pools: dict[str, RedisPool] = {}
        self._blocked_ids: dict[str, int | None] = {}
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
        deadline = time.monotonic() + self.poll_interval
        while True:
            if self._suspect:
                self._reconcile()
            with self._lock:
                uow = self._next_local()
                if uow is not None:
                    return uow
                plan = self._plan_claim()
            if plan is not None:
                uow = self._claim(*plan)
                if uow is not None:
                    return uow
            with self._lock:
                uow = self._next_local()
                if uow is not None:
                    return uow
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self._stopping.is_set():
                    return None
                self._idle += 1
                if self._empty:
                    self._start_waiters()
                    self._wake.notify_all()
                try:
                    self._work.wait(remaining)
                finally:
                    self._idle -= 1

    def _next_local(self) -> UnitOfWork | None:
        """A claimed job no thread has started (lock held); while a suspect
        must run alone, only that one."""
        if self._alone is None:
            return self._local.popleft() if self._local else None
        if self._alone in self._local:
            self._local.remove(self._alone)
            return self._alone
        return None

    def _plan_claim(self) -> tuple[int, bool, list[UnitOfWork]] | None:
        """Reserve room for a claim under the bound (lock held): how many jobs
        (one for the calling thread, one per idle thread, and the prefetch),
        whether one may run alone, and the acknowledgements that go with it."""
        if self._alone is not None or self._reconciling or self._stopping.is_set():
            return None
        acks, self._acks = self._acks, []
        base = self._held - len(acks)
        wanted = max(0, min(1 + self._idle + self.prefetch(), self.limit - base))
        if not wanted and not acks:
            return None
        self._held += wanted
        self._claims += 1
        return wanted, base == 0, acks

    def _claim(self, wanted: int, alone_ok: bool, acks: list[UnitOfWork]) -> UnitOfWork | None:
        """One ``core.fetch`` call: send ``acks``, claim up to ``wanted`` jobs;
        the first is the caller's, the others wait in the local buffer."""
        order = self.queue_order()
        position = {name: index for index, name in enumerate(order, start=1)}
        script_keys = [keys.PAUSED, keys.SUSPECTS, self._running_key]
        for name in order:
            script_keys += [keys.queue(name), self._private[name]]
        args: list[Any] = [wanted, "1" if alone_ok else "0", RECOVERY_TTL, len(acks)]
        for uow in acks:
            args += [position[uow.queue], uow.job, uow.suspect]
        try:
            reply = self.scripts.send("core.fetch", self.pool, script_keys, args)
        except BaseException:
            with self._lock:
                self._acks[:0] = acks  # sent again with the next call: an LREM repeats harmlessly
                self._held -= wanted
                self._lost_reply()
                self._end_claim()
            raise
        units = [self._unit(order[int(reply[i]) - 1], reply[i + 1], reply[i + 2]) for i in range(0, len(reply), 3)]
        with self._lock:
            self._settle(acks)
            self._held -= wanted - len(units)
            if wanted:
                self._empty = not units
            for uow in units:
                self._outstanding[(uow.private, uow.job)] = uow
            if units and units[0].alone:
                self._alone = units[0]
            self._local.extend(units[1:])
            self._work.notify(len(units) - 1)
            self._end_claim()
        return units[0] if units else None

    def _unit(self, name: str, raw: Any, mark: Any) -> UnitOfWork:
        uow = UnitOfWork(name, text(raw), self._private[name], self)
        if mark and mark != -1:
            kind, _, uow.suspect = str(text(mark)).partition(":")
            uow.alone = kind == "2"
        return uow

    def _end_claim(self) -> None:
        self._claims -= 1
        if self._reconciling and not self._claims:
            self._turns.notify_all()

    def _lost_reply(self) -> None:
        """A call failed after it may have reached Redis (lock held): what it
        claimed, if anything, is found and given back before the next claim."""
        self._suspect = True
        self._suspect_gen += 1

    # -- waiting on every queue ---------------------------------------------------

    def waiter_plan(self) -> list[tuple[str, int, bool]]:
        """The waiters, as (queue, rank, whether it claims).

        Waiters claim in ranks across the queues, up to the bound, so that
        with k threads idle each queue has up to k waiters blocked on it (a
        Ruby Sidekiq's idle threads all block on every queue of theirs). When
        there are more queues than the bound allows claimers, the rest watch,
        and one slot is left for the thread a watcher wakes.
        """
        count = len(self._names)
        if count > self.limit:
            return [(name, 0, index < self.limit - 1) for index, name in enumerate(self._names)]
        # A waiter of rank k blocks only while more than k threads are idle,
        # so ranks stop at the concurrency.
        slots = min(self.limit, count * self.capsule.concurrency)
        return [
            (name, rank, True)
            for rank in range(-(-slots // count))
            for index, name in enumerate(self._names)
            if rank * count + index < slots
        ]

    def _start_waiters(self) -> None:
        """The waiter threads, started when a thread first goes idle (lock held).
        Each has a connection of its own, opened when it first blocks."""
        if self._waiters or self._stopping.is_set():
            return
        plan = self.waiter_plan()
        spare = 0 if all(claims for _, _, claims in plan) else 1
        for name, rank, claims in plan:
            key = f"{name}#{rank}"
            self._block_pools[key] = self.config.new_redis_pool(
                1, f"{self.capsule.name}-wait-{key}", read_timeout=self.poll_interval + 1
            )
            thread = threading.Thread(
                target=self._wait_on,
                args=(name, key, rank, claims, spare),
                name=f"wurk-waiter-{self.capsule.name}-{key}",
                daemon=True,
            )
            self._waiters.append(thread)
            thread.start()

    def _wait_on(self, name: str, key: str, rank: int, may_claim: bool, spare: int) -> None:
        """Block on one queue while more than ``rank`` threads are idle: claim
        what arrives, or, past the bound, wake a thread to claim it."""
        client = self._block_pools[key].client
        # redis-py types BLMOVE's timeout as an int; Redis takes fractional seconds.
        timeout = cast(int, self.poll_interval)
        while True:
            with self._lock:
                while not self._stopping.is_set() and (
                    not self._empty or self._idle <= rank or self._reconciling or self._alone
                ):
                    self._wake.wait(1.0)
                if self._stopping.is_set():
                    return
            claiming = False
            try:
                if name in self._paused_queues(client):
                    self._stopping.wait(PAUSED_CACHE_SECONDS)
                    continue
                with self._lock:
                    claiming = may_claim and self._held + 1 + spare <= self.limit and not self._reconciling
                    if claiming:
                        self._held += 1
                        self._claims += 1
                if self._blocked_ids.get(key) is None:
                    self._blocked_ids[key] = client.client_id()
                if claiming:
                    self._claim_blocking(client, name)
                elif client.blmove(keys.queue(name), keys.queue(name), timeout, "RIGHT", "RIGHT"):
                    with self._lock:  # watched, not claimed: a thread claims it
                        self._work.notify()
                    self._stopping.wait(0.05)
            except Exception as exc:
                self._blocked_ids[key] = None  # a new connection comes with a new id
                if not self._stopping.is_set():
                    self.config.handle_exception(exc, {"context": "fetch"})
                self._stopping.wait(WAITER_PAUSE * 4)
            finally:
                if claiming:
                    with self._lock:
                        self._end_claim()

    def _claim_blocking(self, client: Any, name: str) -> None:
        """``BLMOVE`` one job (a claim of one reserved by the caller), then
        check it against the suspect rules."""
        public, private = keys.queue(name), self._private[name]
        try:
            raw = client.blmove(public, private, self.poll_interval, "RIGHT", "LEFT")
        except BaseException:
            with self._lock:
                self._held -= 1
                self._lost_reply()
            raise
        if raw is None:
            with self._lock:
                self._held -= 1
            return
        job = text(raw)
        if self._stopping.is_set():  # quieted while blocked: straight back to the queue's tail
            self.scripts.call("core.requeue", client, [private, public], [job])
            with self._lock:
                self._held -= 1
            return
        with self._lock:
            alone_ok = self._held == 1 and self._claims == 1
        try:
            mark = self.scripts.call(
                "core.adopt",
                client,
                [keys.SUSPECTS, self._running_key, public, private],
                [job, "1" if alone_ok else "0", RECOVERY_TTL],
            )
        except BaseException:
            with self._lock:  # claimed but unchecked: the reconcile gives it back
                self._lost_reply()
            raise
        if mark == -1:
            with self._lock:
                self._held -= 1
            self._stopping.wait(WAITER_PAUSE)  # a suspect that must run alone: others may take it
            return
        uow = self._unit(name, job, mark)
        with self._lock:
            self._outstanding[(uow.private, uow.job)] = uow
            self._local.append(uow)
            if uow.alone:
                self._alone = uow
            self._work.notify()

    # -- acknowledging ------------------------------------------------------------

    def acknowledge(self, uow: UnitOfWork) -> None:
        """Queue the ``LREM``; it travels with the next claim, or ``flush_acks``.
        A suspect's goes at once, so that its mark clears and, if it ran
        alone, the other threads resume."""
        with self._lock:
            self._acks.append(uow)
        if uow.suspect:
            self.flush_acks()

    def _settle(self, units: list[UnitOfWork]) -> None:
        """These jobs have left the private list (lock held): stop tracking them."""
        for uow in units:
            self._outstanding.pop((uow.private, uow.job), None)
            self._held -= 1
            if uow is self._alone:
                self._alone = None
                self._work.notify_all()
                self._wake.notify_all()

    def flush_acks(self) -> None:
        with self._lock:
            while self._reconciling:
                self._turns.wait()
            if not self._acks:
                return
            acks, self._acks = self._acks, []
            self._claims += 1
        self._claim(0, False, acks)

    # -- giving jobs back ---------------------------------------------------------

    def requeue(self, units: list[UnitOfWork]) -> int:
        """Give specific claimed jobs back to the tail of their queues (fetched next)."""
        moved = 0
        conn = self.pool.client
        for uow in units:
            moved += int(self.scripts.call("core.requeue", conn, [uow.private, keys.queue(uow.queue)], [uow.job]))
            if uow.suspect:
                conn.srem(self._running_key, uow.suspect)
        with self._lock:
            self._settle(units)
        return moved

    def quiet(self) -> None:
        """Stop claiming: idle threads and waiters return (one-way). A waiter
        blocked on its queue is unblocked, so that it claims nothing more."""
        with self._lock:
            self._stopping.set()
            self._work.notify_all()
            self._wake.notify_all()
        blocked = [ident for ident in self._blocked_ids.values() if ident is not None]
        for ident in blocked:
            try:
                self.config.redis_pool.client.client_unblock(ident)
            except RedisError:
                pass  # the waiter's block times out by itself within the poll interval

    def unstarted(self) -> list[UnitOfWork]:
        """Claimed jobs no thread has started (taken out of the local buffer)."""
        with self._lock:
            units, self._local = list(self._local), collections.deque()
        return units

    def requeue_all(self) -> int:
        """Give every job still in this process's private lists back to its queue.

        Called at shutdown once acknowledgements are flushed, so what is left
        is unfinished work: running past the deadline, or claimed and unstarted.
        The waiters end first, so none claims behind the sweep.
        """
        self.quiet()
        for thread in self._waiters:
            thread.join(self.poll_interval + 2)
        self.unstarted()
        self.flush_acks()
        moved = self._requeue_leftovers(keep=set())
        self.pool.client.delete(self._running_key)
        with self._lock:
            self._outstanding.clear()
            self._held = 0
            self._alone = None
        for pool in self._block_pools.values():
            pool.disconnect()
        return moved

    def _requeue_leftovers(self, keep: set[tuple[str, str | bytes]]) -> int:
        moved = 0
        conn = self.pool.client
        for name, private in self._private.items():
            leftovers = [job for job in map(text, conn.lrange(private, 0, -1)) if (private, job) not in keep]
            if leftovers:
                # Newest claim first, so the oldest ends up at the queue's tail
                # and is fetched first again.
                moved += int(self.scripts.call("core.requeue", conn, [private, keys.queue(name)], leftovers))
        return moved

    def abandon(self, uow: UnitOfWork) -> None:
        """A job that was neither finished nor booked (the retry layer could not
        reach Redis): it is still in the private list, and the next claim gives
        it back to its queue (the reaper would not: this process is alive)."""
        with self._lock:
            self._outstanding.pop((uow.private, uow.job), None)
            if uow.suspect:
                self._unmark.append(uow.suspect)
            self._lost_reply()
            if uow is self._alone:
                self._alone = None
                self._work.notify_all()
                self._wake.notify_all()

    def _reconcile(self) -> None:
        """Give back every job in our private lists that no thread holds: a claim
        whose reply was lost, or an abandoned job. No claim runs meanwhile, so
        nothing in transit is mistaken for a leftover."""
        with self._lock:
            if self._reconciling:
                return
            self._reconciling = True
            while self._claims:
                self._turns.wait()
            generation = self._suspect_gen
            keep = set(self._outstanding)
            unmark, self._unmark = self._unmark, []
        try:
            self._requeue_leftovers(keep)
            if unmark:  # given back: no longer running here
                self.pool.client.srem(self._running_key, *unmark)
            with self._lock:
                if self._suspect_gen == generation:
                    self._suspect = False
                self._held = len(self._outstanding)
        finally:
            with self._lock:
                self._reconciling = False
                self._turns.notify_all()
                self._wake.notify_all()
