"""The claim ledger: what one fetcher holds, under one lock.

A fetcher has several parts that claim, wait and give back at once: the
processor threads calling ``core.fetch``, the waiter threads blocked on their
queues, a reconcile after a lost reply. They share one bound and one set of
books, kept here so that each part reads and changes them the same way:

* the *bound*: what this process holds in its private lists never exceeds
  ``limit`` (twice its concurrency), which bounds the jobs a crash hands back
  to be run again and the work a slow job's neighbours wait behind;
* *reservations*: a claim reserves its room under the bound before its call
  leaves (``held`` counts the jobs held plus the claims in flight), and gives
  back what it did not get once the reply is in;
* the claimed jobs no thread has started (``local``), the acknowledgements
  not yet sent (``acks``), and every job claimed and neither acknowledged nor
  given back (``outstanding``: what a reconcile must leave where it is);
* the lone suspect (``alone``): while a suspect recovered twice runs, nothing
  else starts and nothing more is claimed;
* the lost-reply flag (``suspect``) that sends the next claim through a
  reconcile first (:mod:`wurk.fetch_reconcile`).

Every field is read and written with ``lock`` held, and so is every method
here: the callers take the lock once around a few steps that must happen
together. The ledger never talks to Redis.
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from wurk.fetch import UnitOfWork

#: What a claim was given room for: how many jobs, whether one may run alone,
#: and the acknowledgements that travel with it.
ClaimPlan = tuple[int, bool, list["UnitOfWork"]]


class ClaimLedger:
    """The bound, the reservations and the claimed jobs of one fetcher."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.lock = threading.Lock()
        #: Idle processor threads wait on this for a job a waiter claimed.
        self.work = threading.Condition(self.lock)
        #: A reconcile waits on this for claims to end, and claims for a reconcile.
        self.turns = threading.Condition(self.lock)
        #: Waiters wait on this for an idle thread with every queue empty.
        self.wake = threading.Condition(self.lock)
        #: Set by a quiet (one-way): nothing more is claimed.
        self.stopping = threading.Event()
        #: The last claim found every queue empty: only then do waiters block.
        self.empty = False
        #: Jobs in this process's private lists, as far as it knows, plus the
        #: claims in flight: what the bound is checked against.
        self.held = 0
        self.idle = 0
        #: Claims whose call is under way; a reconcile waits for none.
        self.in_flight = 0
        self.reconciling = False
        #: A reply was lost: a reconcile runs before the next claim.
        self.suspect = False
        #: Counts lost replies, so a reconcile clears only what it covered.
        self.generation = 0
        self.alone: UnitOfWork | None = None
        #: Suspect ids of abandoned jobs, to clear from the running set.
        self.unmark: list[str] = []
        self.local: collections.deque[UnitOfWork] = collections.deque()
        self.acks: list[UnitOfWork] = []
        #: Every claimed job not yet acknowledged or given back, by (private
        #: list, job).
        self.outstanding: dict[tuple[str, str | bytes], UnitOfWork] = {}

    def next_local(self) -> UnitOfWork | None:
        """A claimed job no thread has started; while a suspect must run
        alone, only that one."""
        if self.alone is None:
            return self.local.popleft() if self.local else None
        if self.alone in self.local:
            self.local.remove(self.alone)
            return self.alone
        return None

    def plan(self, prefetch: Callable[[], int]) -> ClaimPlan | None:
        """Reserve room for a claim under the bound: how many jobs (one for
        the calling thread, one per idle thread, and the prefetch), whether
        one may run alone, and the acknowledgements that go with it."""
        if self.alone is not None or self.reconciling or self.stopping.is_set():
            return None
        acks, self.acks = self.acks, []
        base = self.held - len(acks)
        wanted = max(0, min(1 + self.idle + prefetch(), self.limit - base))
        if not wanted and not acks:
            return None
        self.held += wanted
        self.in_flight += 1
        return wanted, base == 0, acks

    def reserve_one(self, spare: int) -> bool:
        """Room for a waiter's claim of one job, keeping ``spare`` slots free."""
        if self.held + 1 + spare > self.limit or self.reconciling:
            return False
        self.held += 1
        self.in_flight += 1
        return True

    def claimed(self, wanted: int, acks: list[UnitOfWork], units: list[UnitOfWork]) -> UnitOfWork | None:
        """A claim's reply is in: ``acks`` left the private lists and
        ``units`` arrived; the first is the caller's, the others wait for
        idle threads."""
        self.settle(acks)
        self.held -= wanted - len(units)
        if wanted:
            self.empty = not units
        for uow in units:
            self.outstanding[(uow.private, uow.job)] = uow
        if units and units[0].alone:
            self.alone = units[0]
        self.local.extend(units[1:])
        self.work.notify(len(units) - 1)
        self.end_claim()
        return units[0] if units else None

    def claim_failed(self, wanted: int, acks: list[UnitOfWork]) -> None:
        """A claim's call failed after it may have reached Redis."""
        self.acks[:0] = acks  # sent again with the next call: an LREM repeats harmlessly
        self.held -= wanted
        self.lost_reply()
        self.end_claim()

    def adopted(self, uow: UnitOfWork) -> None:
        """A waiter claimed ``uow``: an idle thread takes it."""
        self.outstanding[(uow.private, uow.job)] = uow
        self.local.append(uow)
        if uow.alone:
            self.alone = uow
        self.work.notify()

    def end_claim(self) -> None:
        self.in_flight -= 1
        if self.reconciling and not self.in_flight:
            self.turns.notify_all()

    def lost_reply(self) -> None:
        """What a failed call claimed, if anything, is found and given back
        before the next claim."""
        self.suspect = True
        self.generation += 1

    def settle(self, units: list[UnitOfWork]) -> None:
        """These jobs have left the private list: stop tracking them."""
        for uow in units:
            self.outstanding.pop((uow.private, uow.job), None)
            self.held -= 1
            if uow is self.alone:
                self.release_alone()

    def release_alone(self) -> None:
        """The lone suspect is done: the other threads and the waiters resume."""
        self.alone = None
        self.work.notify_all()
        self.wake.notify_all()
