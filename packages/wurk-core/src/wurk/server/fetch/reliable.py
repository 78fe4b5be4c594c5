"""The reliable fetcher: the claim, the acknowledgement, and its public face.

To spend as few round trips as possible, one ``core.fetch`` script call
carries the acknowledgements gathered since the last call and claims a job
for every idle thread — and, while jobs take only milliseconds, more ahead.
What this process holds in its private lists never exceeds twice its
concurrency. The other parts (the ledger, the waiters, the reconcile, the
suspects' clock) live beside this module; :mod:`wurk.server.fetch` draws how a job
moves between them.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from wurk.client.payload import exact as text
from wurk.redis import keys
from wurk.server.fetch.ledger import ClaimLedger
from wurk.server.fetch.reconcile import Reconciler
from wurk.server.fetch.suspects import SuspectClock, apply_mark
from wurk.server.fetch.unit import UnitOfWork
from wurk.server.fetch.waiters import WAITER_PAUSE, Waiters
from wurk.server.reaper import RECOVERY_TTL

if TYPE_CHECKING:
    from wurk.config.capsule import Capsule
    from wurk.server.identity import ProcessIdentity

__all__ = ["DEFAULT_POLL_INTERVAL", "ReliableFetcher"]

DEFAULT_POLL_INTERVAL = 2.0


def async_ahead(async_concurrency: int) -> int:
    """The jobs claimed ahead for the event loop while async jobs run: a
    tenth of ``async_concurrency``, so that a process with hundreds of them in
    flight claims several jobs a round trip."""
    return async_concurrency // 10


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
        self.ledger = ClaimLedger(self.limit)
        self.ledger.lent_ahead = async_ahead(int(self.config.option("async_concurrency") or 0))
        self.waiters = Waiters(capsule, self.ledger, self._private, self._running_key, self.poll_interval, self._unit)
        #: With one queue, an idle thread blocks on it itself and runs what it
        #: claims at once, as a Ruby Sidekiq thread does: no waiter, and no
        #: hand-off between threads, stands between a job's push and its start.
        #: With several, the waiters block for the idle threads, in ranks.
        self._own_claims = len(self._names) == 1
        #: The claims' own connection: kept from one claim to the next (the
        #: fetch pool has one for it beside the threads' own).
        self.claims = self.pool.kept()
        #: With the queues always tried in one order, a claim's keys and each
        #: queue's place among them are the same every time.
        self._fixed = self._keys_for(self._names) if self._mode == "strict" or len(self._names) == 1 else None
        self.reconciler = Reconciler(self.ledger, self.pool, self.scripts, self._private, self._running_key)
        self.clock = SuspectClock(self.config, self.ledger, self.pool, self._running_key)
        #: How many jobs to claim beyond the threads waiting right now; the
        #: manager raises it while jobs are short, when claiming one job per
        #: round trip would leave the threads waiting on Redis.
        self.prefetch: Callable[[], int] = lambda: 0

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

    # -- fetching ---------------------------------------------------------------

    def retrieve_work(self) -> UnitOfWork | None:
        """The next job, or ``None`` after ``fetch_poll_interval`` with none.
        The calling thread runs it next, so a suspect's clock starts now."""
        uow = self._next_unit()
        if uow is not None and uow.suspect:
            self.clock.start(uow)
        return uow

    def _next_unit(self) -> UnitOfWork | None:
        ledger = self.ledger
        deadline = time.monotonic() + self.poll_interval
        while True:
            if ledger.suspect:
                self.reconciler.reconcile()
            with ledger.lock:
                uow = ledger.next_local()
                if uow is not None:
                    return uow
                plan = ledger.plan(self.prefetch)
            if plan is not None:
                uow = self._claim(*plan)
                if uow is not None:
                    return uow
            with ledger.lock:
                uow = ledger.next_local()
                if uow is not None:
                    return uow
                remaining = deadline - time.monotonic()
                if remaining <= 0 or ledger.stopping.is_set():
                    return None
                own = self._own_claims and ledger.reserve_own()
                if not own:
                    self._idle(remaining)
                    continue
            uow = None
            try:
                uow = self.waiters.claim_for_thread(remaining)
            finally:
                # Booked before the claim ends: a reconcile, which waits for
                # no claim in flight, must find the job outstanding.
                with ledger.lock:
                    if uow is not None:
                        ledger.took(uow)
                    ledger.end_own()
            if uow is not None:
                return uow

    def _idle(self, remaining: float) -> None:
        """Wait (ledger lock held) for a job another part claims: a waiter's,
        or a claim ahead."""
        ledger = self.ledger
        ledger.thread_idles()
        if ledger.empty and not self._own_claims:
            self.waiters.start()
            ledger.wake.notify_all()
        try:
            # A thread that claims for itself waits here only while the bound
            # is full or a lone suspect runs: it looks again soon.
            ledger.work.wait(min(remaining, WAITER_PAUSE) if self._own_claims else remaining)
        finally:
            ledger.thread_wakes()

    def _keys_for(self, order: list[str]) -> tuple[list[str], list[str], dict[str, int]]:
        """A claim's keys for queues tried in ``order``, the order, and each
        queue's place in it (as the script numbers them, from 1)."""
        script_keys = [keys.PAUSED, keys.SUSPECTS, self._running_key]
        for name in order:
            script_keys += [keys.queue(name), self._private[name]]
        return script_keys, order, {name: index for index, name in enumerate(order, start=1)}

    def _claim(self, wanted: int, alone_ok: bool, acks: list[UnitOfWork]) -> UnitOfWork | None:
        """One ``core.fetch`` call: send ``acks``, claim up to ``wanted`` jobs;
        the first is the caller's, the others wait in the local buffer."""
        script_keys, order, position = self._fixed or self._keys_for(self.queue_order())
        args: list[Any] = [wanted, "1" if alone_ok else "0", RECOVERY_TTL, len(acks)]
        for uow in acks:
            args += [position[uow.queue], uow.job, uow.suspect]
        try:
            reply = self.scripts.send("core.fetch", self.pool, script_keys, args, via=self.claims)
        except BaseException:
            with self.ledger.lock:
                self.ledger.claim_failed(wanted, acks, alone_ok)
            raise
        units = [self._unit(order[int(reply[i]) - 1], reply[i + 1], reply[i + 2]) for i in range(0, len(reply), 3)]
        with self.ledger.lock:
            return self.ledger.claimed(wanted, acks, units, alone_ok)

    def _unit(self, name: str, raw: Any, mark: Any) -> UnitOfWork:
        uow = UnitOfWork(name, text(raw), self._private[name], self)
        if mark and mark != -1:
            apply_mark(uow, mark)
        return uow

    def lend(self, uow: UnitOfWork) -> None:
        """``uow`` runs on the event loop and its thread claims again: the
        bound widens by one while the job is held (see :mod:`wurk.server.asyncjobs`)."""
        with self.ledger.lock:
            self.ledger.lend(uow)

    # -- acknowledging ------------------------------------------------------------

    def acknowledge(self, uow: UnitOfWork) -> None:
        """Queue the ``LREM``; it travels with the next claim, or ``flush_acks``.
        A suspect's goes at once, so that its mark clears and, if it ran
        alone, the other threads resume."""
        with self.ledger.lock:
            self.ledger.acknowledged(uow)
        if uow.suspect:
            self.clock.stop(uow)
            self.flush_acks()

    def flush_acks(self) -> None:
        with self.ledger.lock:
            acks = self.ledger.start_flush()
        if acks:
            self._claim(0, False, acks)

    # -- giving jobs back ---------------------------------------------------------

    def requeue(self, units: list[UnitOfWork]) -> int:
        """Give specific claimed jobs back to the tail of their queues (fetched next)."""
        moved = 0
        conn = self.pool.client
        for uow in units:
            moved += int(self.scripts.call("core.requeue", conn, [uow.private, keys.queue(uow.queue)], [uow.job]))
            if uow.suspect:
                self.clock.stop(uow)
                conn.srem(self._running_key, uow.suspect)
        with self.ledger.lock:
            self.ledger.settle(units)
        return moved

    def abandon(self, uow: UnitOfWork) -> None:
        """A job that was neither finished nor booked (the retry layer could not
        reach Redis): it is still in the private list, and the next claim gives
        it back to its queue (the reaper would not: this process is alive)."""
        if uow.suspect:
            self.clock.stop(uow)
        self.reconciler.abandon(uow)

    def quiet(self) -> None:
        """Stop claiming: idle threads and waiters return (one-way). A waiter
        blocked on its queue is unblocked, so that it claims nothing more."""
        with self.ledger.lock:
            self.ledger.quiet()
        self.waiters.unblock()

    def unstarted(self) -> list[UnitOfWork]:
        """Claimed jobs no thread has started (taken out of the local buffer)."""
        with self.ledger.lock:
            return self.ledger.take_unstarted()

    def requeue_all(self) -> int:
        """Give every job still in this process's private lists back to its queue.

        Called at shutdown once acknowledgements are flushed, so what is left
        is unfinished work: running past the deadline, or claimed and unstarted.
        The waiters end first, so none claims behind the sweep.
        """
        self.quiet()
        self.waiters.join()
        self.unstarted()
        try:
            self.flush_acks()
            moved = self.reconciler.requeue_leftovers(keep=set())
            self.clock.stop_all()
            self.pool.client.delete(self._running_key)
        finally:
            # Whatever is left, the reaper gives back (our nonce is no longer
            # live): this fetcher holds nothing from now on.
            with self.ledger.lock:
                self.ledger.close()
            self.claims.release()
        self.waiters.disconnect()
        return moved
