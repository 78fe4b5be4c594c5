"""Waiter threads: blocking on every queue while the fetch finds them empty.

``core.fetch`` looks at every queue in one call, but when they are all empty
a poll would either burn round trips or leave a new job waiting. So once a
claim finds every served queue empty, idle threads wait on the ledger and
*waiter* threads block on the queues with ``BLMOVE``, which has no multi-key
form: one waiter per (queue, rank), each on a connection of its own. With k
threads idle, up to k waiters block on each queue, in ranks across the queues
within the bound (see :meth:`Waiters.plan`). A job pushed to any queue is
picked up at once, and a queue shared with other workers (a Ruby Sidekiq,
whose idle threads all block on every queue) is shared fairly. With more
queues than the bound allows claimers, the last waiters only watch their
queue and wake a thread to claim.

A waiter's claim is a claim of one job: reserved in the ledger first, moved
by ``BLMOVE``, then checked against the suspect rules (``core.adopt``, a
second round trip only while there are suspects) and handed to an idle
thread. A quiet unblocks every waiter at once with
``CLIENT UNBLOCK`` on its connection's id, so that none claims afterwards.

Waiters are plain threads, not components (:class:`wurk.Component`), on
purpose. They are the fetcher's own blocking reads, as a processor's
``retrieve_work`` is: started lazily by a claim that found the queues empty
(not at boot), planned per queue and rank from the idle threads, unblocked by
the fetcher's ``quiet`` and joined by it, all under the claim ledger's lock.
A component's life (registered once, started before any fetch, ticked on an
interval, stopped by the launcher after the jobs) fits none of that, and a
waiter's error is not a tick to back off from: its reservation in the ledger
ends, it is reported, and the waiter blocks again after a short pause.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from redis.exceptions import RedisError

from wurk.client.payload import exact as text
from wurk.redis import keys
from wurk.server.fetch.suspects import GIVEN_BACK, adopt

if TYPE_CHECKING:
    from wurk.config.capsule import Capsule
    from wurk.redis.connection import RedisPool
    from wurk.server.fetch.ledger import ClaimLedger
    from wurk.server.fetch.unit import UnitOfWork

PAUSED_CACHE_SECONDS = 1.0
#: How long a waiter rests after a failed block or a suspect it had to give back.
WAITER_PAUSE = 0.25


class Waiters:
    """The waiter threads of one fetcher, started when a thread first goes idle."""

    def __init__(
        self,
        capsule: Capsule,
        ledger: ClaimLedger,
        private: dict[str, str],
        running_key: str,
        poll_interval: float,
        unit: Callable[[str, Any, Any], UnitOfWork],
    ) -> None:
        self.capsule = capsule
        self.config = capsule.config
        self.scripts = capsule.config.scripts
        self.ledger = ledger
        self.names = list(capsule.weights)
        #: Queue name to this process's private list for it.
        self.private = private
        self.running_key = running_key
        self.poll_interval = poll_interval
        #: Builds the unit of work for a claimed job: (queue, job, mark).
        self.unit = unit
        self.threads: list[threading.Thread] = []
        #: One connection per waiter, so a quiet can unblock each by client id.
        self.pools: dict[str, RedisPool] = {}
        self.blocked_ids: dict[str, int | None] = {}
        self._paused: frozenset[str] = frozenset()
        self._paused_at = 0.0

    def plan(self) -> list[tuple[str, int, bool]]:
        """The waiters, as (queue, rank, whether it claims).

        Waiters claim in ranks across the queues, up to the bound, so that
        with k threads idle each queue has up to k waiters blocked on it (a
        Ruby Sidekiq's idle threads all block on every queue of theirs). When
        there are more queues than the bound allows claimers, the rest watch,
        and one slot is left for the thread a watcher wakes.
        """
        count = len(self.names)
        limit = self.ledger.limit
        if count > limit:
            return [(name, 0, index < limit - 1) for index, name in enumerate(self.names)]
        # A waiter of rank k blocks only while more than k threads are idle,
        # so ranks stop at the concurrency.
        slots = min(limit, count * self.capsule.concurrency)
        return [
            (name, rank, True)
            for rank in range(-(-slots // count))
            for index, name in enumerate(self.names)
            if rank * count + index < slots
        ]

    def start(self) -> None:
        """Start the waiter threads, once (ledger lock held). Each opens its
        connection when it first blocks."""
        if self.threads or self.ledger.stopping.is_set():
            return
        plan = self.plan()
        spare = 0 if all(claims for _, _, claims in plan) else 1
        for name, rank, claims in plan:
            key = f"{name}#{rank}"
            self.pools[key] = self.config.new_redis_pool(
                1, f"{self.capsule.name}-wait-{key}", read_timeout=self.poll_interval + 1
            )
            thread = threading.Thread(
                target=self._wait_on,
                args=(name, key, rank, claims, spare),
                name=f"wurk-waiter-{self.capsule.name}-{key}",
                daemon=True,
            )
            self.threads.append(thread)
            thread.start()

    def unblock(self) -> None:
        """After a quiet: end every waiter's block now, so that it claims nothing more."""
        blocked = [ident for ident in self.blocked_ids.values() if ident is not None]
        for ident in blocked:
            try:
                self.config.redis_pool.client.client_unblock(ident)
            except RedisError:
                pass  # the waiter's block times out by itself within the poll interval

    def join(self) -> None:
        for thread in self.threads:
            thread.join(self.poll_interval + 2)

    def disconnect(self) -> None:
        for pool in self.pools.values():
            pool.disconnect()

    def _paused_queues(self, conn: Any) -> frozenset[str]:
        now = time.monotonic()
        if now - self._paused_at > PAUSED_CACHE_SECONDS:
            members = conn.smembers(keys.PAUSED)
            self._paused = frozenset(m.decode() if isinstance(m, bytes) else m for m in members)
            self._paused_at = now
        return self._paused

    def _wait_on(self, name: str, key: str, rank: int, may_claim: bool, spare: int) -> None:
        """Block on one queue while more than ``rank`` threads are idle: claim
        what arrives, or, past the bound, wake a thread to claim it."""
        ledger = self.ledger
        stopping = ledger.stopping
        client = self.pools[key].client
        # redis-py types BLMOVE's timeout as an int; Redis takes fractional seconds.
        timeout = cast(int, self.poll_interval)
        while True:
            with ledger.lock:
                while not stopping.is_set() and (
                    not ledger.empty or ledger.idle <= rank or ledger.reconciling or ledger.alone
                ):
                    ledger.wake.wait(1.0)
                if stopping.is_set():
                    return
            claiming = False
            try:
                if name in self._paused_queues(client):
                    stopping.wait(PAUSED_CACHE_SECONDS)
                    continue
                with ledger.lock:
                    claiming = may_claim and ledger.reserve_one(spare)
                if self.blocked_ids.get(key) is None:
                    self.blocked_ids[key] = client.client_id()
                if claiming:
                    uow = self._claim_blocking(self.pools[key], name, self.poll_interval)
                    if uow is not None:
                        with ledger.lock:
                            ledger.adopted(uow)
                elif client.blmove(keys.queue(name), keys.queue(name), timeout, "RIGHT", "RIGHT"):
                    with ledger.lock:  # watched, not claimed: a thread claims it
                        ledger.work.notify()
                    stopping.wait(0.05)
            except Exception as exc:
                self.blocked_ids[key] = None  # a new connection comes with a new id
                if not stopping.is_set():
                    self.config.handle_exception(exc, {"context": "fetch"})
                stopping.wait(WAITER_PAUSE * 4)
            finally:
                if claiming:
                    with ledger.lock:
                        ledger.end_claim()

    def claim_for_thread(self, timeout: float) -> UnitOfWork | None:
        """A processor thread's own claim of one job from the capsule's one
        queue (room reserved by the caller: :meth:`ClaimLedger.reserve_own`),
        blocking up to ``timeout`` seconds: the job it brings, checked, is the
        thread's to run at once, with no hand-off between threads.

        Each thread blocks on a connection of its own, which a quiet
        unblocks like a waiter's.
        """
        key = f"thread-{threading.get_ident()}"
        pool = self.pools.get(key)
        if pool is None:
            pool = self.pools[key] = self.config.new_redis_pool(
                1, f"{self.capsule.name}-own-{threading.current_thread().name}", read_timeout=self.poll_interval + 1
            )
        client = pool.client
        name = self.names[0]
        try:
            if name in self._paused_queues(client):
                with self.ledger.lock:
                    self.ledger.blocked_claim_came_back_empty()
                self.ledger.stopping.wait(min(timeout, PAUSED_CACHE_SECONDS))
                return None
            if self.blocked_ids.get(key) is None:
                self.blocked_ids[key] = client.client_id()
        except BaseException:
            with self.ledger.lock:
                self.ledger.blocked_claim_came_back_empty()
            raise
        try:
            return self._claim_blocking(pool, name, timeout)
        except BaseException:
            self.blocked_ids[key] = None  # a new connection comes with a new id
            raise

    def _claim_blocking(self, pool: RedisPool, name: str, timeout: float) -> UnitOfWork | None:
        """``BLMOVE`` one job (a claim of one reserved by the caller), then
        check it against the suspect rules: the job to run, or ``None``.

        The check costs a round trip only while the suspects set is not
        empty (a crash in the last 72 hours): the set's size comes back in
        the same round trip as the job, read just after the move. A suspect
        enters the set in the same step that puts it back on its queue, so a
        job moved as a suspect always finds the set non-empty; an empty set
        is what ``core.adopt`` itself would have read first, and answered 0.

        Both go through the pool's raw send path, without a pipeline object:
        this is the path from a push to the start of its job on an idle
        worker, and the object's bookkeeping cost about as much as the
        rest of it.
        """
        ledger = self.ledger
        public, private = keys.queue(name), self.private[name]
        try:
            raw, suspects = pool.send([("BLMOVE", public, private, "RIGHT", "LEFT", timeout), ("SCARD", keys.SUSPECTS)])
        except BaseException:
            with ledger.lock:
                ledger.blocked_claim_lost()
            raise
        if raw is None:
            with ledger.lock:
                ledger.blocked_claim_came_back_empty()
            return None
        job = text(raw)
        client = pool.client
        if ledger.stopping.is_set():  # quieted while blocked: straight back to the queue's tail
            self.scripts.call("core.requeue", client, [private, public], [job])
            with ledger.lock:
                ledger.blocked_claim_gave_back()
            return None
        if not suspects:
            return self.unit(name, job, 0)
        with ledger.lock:
            alone_ok = ledger.go_solo()
        try:
            return self._adopt(client, name, public, private, job, alone_ok)
        finally:
            if alone_ok:
                with ledger.lock:
                    ledger.end_solo()

    def _adopt(
        self, client: Any, name: str, public: str, private: str, job: str | bytes, alone_ok: bool
    ) -> UnitOfWork | None:
        """Mark or give back a job just claimed: the job to run, or ``None``."""
        ledger = self.ledger
        try:
            mark = adopt(self.scripts, client, self.running_key, public, private, job, alone_ok)
        except BaseException:
            with ledger.lock:  # claimed but unchecked: the reconcile gives it back
                ledger.lost_reply()
            raise
        if mark == GIVEN_BACK:
            with ledger.lock:
                ledger.blocked_claim_gave_back()
            ledger.stopping.wait(WAITER_PAUSE)  # a suspect that must run alone: others may take it
            return None
        return self.unit(name, job, mark)
