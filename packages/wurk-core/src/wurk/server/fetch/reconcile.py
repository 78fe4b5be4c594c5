"""Giving back what no thread holds: after a lost reply, and at shutdown.

A claim whose reply is lost (a timeout, a dropped connection) may or may not
have moved jobs into this process's private lists; retrying it blindly could
claim twice, and the reaper never looks at a live process's lists. So the
fetcher is marked *suspect* instead (:meth:`ClaimLedger.lost_reply`), and
before its next claim a reconcile gives back every job in its private lists
that no thread holds. A job the retry layer could not book (abandoned) is
given back the same way.

No claim runs during a reconcile, so nothing in transit is mistaken for a
leftover: the reconcile waits for the claims in flight to end, and new ones
wait for it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from wurk.client.payload import exact as text
from wurk.redis import keys

if TYPE_CHECKING:
    from wurk.redis.connection import RedisPool
    from wurk.redis.scripts import ScriptRegistry
    from wurk.server.fetch.ledger import ClaimLedger
    from wurk.server.fetch.unit import UnitOfWork


class Reconciler:
    """Finds and gives back the jobs of one fetcher that no thread holds."""

    def __init__(
        self,
        ledger: ClaimLedger,
        pool: RedisPool,
        scripts: ScriptRegistry,
        private: dict[str, str],
        running_key: str,
    ) -> None:
        self.ledger = ledger
        self.pool = pool
        self.scripts = scripts
        #: Queue name to this process's private list for it.
        self.private = private
        self.running_key = running_key

    def abandon(self, uow: UnitOfWork) -> None:
        """A job that was neither finished nor booked is still in the private
        list: the next claim's reconcile gives it back to its queue."""
        with self.ledger.lock:
            self.ledger.abandoned(uow)

    def reconcile(self) -> None:
        """Give back every job in our private lists that no thread holds."""
        ledger = self.ledger
        with ledger.lock:
            plan = ledger.start_reconcile()
        if plan is None:
            return
        generation, keep, unmark = plan
        try:
            self.requeue_leftovers(keep)
            if unmark:  # given back: no longer running here
                self.pool.client.srem(self.running_key, *unmark)
            with ledger.lock:
                ledger.reconciled(generation)
        finally:
            with ledger.lock:
                ledger.end_reconcile()

    def requeue_leftovers(self, keep: set[tuple[str, str | bytes]]) -> int:
        """Give every job in the private lists but those in ``keep`` back to
        the tail of its queue; how many moved."""
        moved = 0
        conn = self.pool.client
        for name, private in self.private.items():
            leftovers = [job for job in map(text, conn.lrange(private, 0, -1)) if (private, job) not in keep]
            if leftovers:
                # Newest claim first, so the oldest ends up at the queue's tail
                # and is fetched first again.
                moved += int(self.scripts.call("core.requeue", conn, [private, keys.queue(name)], leftovers))
        return moved
