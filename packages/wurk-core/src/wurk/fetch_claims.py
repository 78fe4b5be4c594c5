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
  else starts and nothing more is claimed; and while a claim that may bring
  one is in flight (``solo``: a claim made with nothing held), no other claim
  starts, or a job claimed beside it would run next to the lone suspect and a
  crash it caused would be counted against the suspect. A process may run
  several fetchers (capsules, an embedded worker beside another), and a crash
  takes them all, so "alone" is process-wide: the :class:`SoloGate` lets one
  ledger at a time claim a lone suspect, only while no other holds a job, and
  keeps the others from claiming until that suspect is done;
* the lost-reply flag (``suspect``) that sends the next claim through a
  reconcile first (:mod:`wurk.fetch_reconcile`).

Every field is read and written with ``lock`` held, and so is every method
here: the callers take the lock once around a few steps that must happen
together. The ledger never talks to Redis.
"""

from __future__ import annotations

import collections
import os
import threading
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from wurk.fetch import UnitOfWork


class SoloGate:
    """What the fetchers of one process share so that a lone suspect is
    alone in its *process*: the ledger that may run one (``owner``).

    Its lock is taken inside a ledger's, never the other way round, and only
    around what raises a ledger's ``held``, so a ledger that reads the others'
    ``held`` under it sees no claim start behind its back.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.ledgers: weakref.WeakSet[ClaimLedger] = weakref.WeakSet()
        self.owner: ClaimLedger | None = None

    def blocks(self, ledger: ClaimLedger) -> bool:
        """Another ledger may be running a lone suspect: ``ledger`` claims nothing."""
        return self.owner is not None and self.owner is not ledger

    def take(self, ledger: ClaimLedger) -> bool:
        """``ledger`` holds nothing but the claim it is making: it may bring a
        lone suspect if no other ledger holds anything either."""
        if self.owner is not None or any(other.held for other in self.ledgers if other is not ledger):
            return False
        self.owner = ledger
        return True

    def give_up(self, ledger: ClaimLedger) -> None:
        with self.lock:
            if self.owner is ledger:
                self.owner = None


def _new_gate() -> None:
    global PROCESS_GATE
    PROCESS_GATE = SoloGate()  # a forked child runs none of its parent's jobs


PROCESS_GATE = SoloGate()
os.register_at_fork(after_in_child=_new_gate)

#: What a claim was given room for: how many jobs, whether one may run alone,
#: and the acknowledgements that travel with it.
ClaimPlan = tuple[int, bool, list["UnitOfWork"]]


class ClaimLedger:
    """The bound, the reservations and the claimed jobs of one fetcher."""

    def __init__(self, limit: int, gate: SoloGate | None = None) -> None:
        self.limit = limit
        self.gate = gate if gate is not None else PROCESS_GATE
        self.gate.ledgers.add(self)
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
        #: A claim allowed to bring a lone suspect is in flight.
        self.solo = False
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
        if self.alone is not None or self.solo or self.reconciling or self.stopping.is_set():
            return None
        with self.gate.lock:
            if self.gate.blocks(self):
                return None
            acks, self.acks = self.acks, []
            base = self.held - len(acks)
            wanted = max(0, min(1 + self.idle + prefetch(), self.limit - base))
            if not wanted and not acks:
                return None
            self.held += wanted
            self.in_flight += 1
            self.solo = alone_ok = base == 0 and wanted > 0 and self.gate.take(self)
        return wanted, alone_ok, acks

    def reserve_one(self, spare: int) -> bool:
        """Room for a waiter's claim of one job, keeping ``spare`` slots free."""
        if self.held + 1 + spare > self.limit or self.reconciling or self.solo:
            return False
        with self.gate.lock:
            if self.gate.blocks(self):
                return False
            self.held += 1
        self.in_flight += 1
        return True

    def go_solo(self) -> bool:
        """A waiter's claimed job may run alone if it is all this process
        holds; if so, no other claim starts until :meth:`end_claim` with
        ``solo``."""
        if self.solo or self.held != 1 or self.in_flight != 1:
            return False
        with self.gate.lock:
            self.solo = self.gate.take(self)
        return self.solo

    def claimed(
        self, wanted: int, acks: list[UnitOfWork], units: list[UnitOfWork], solo: bool = False
    ) -> UnitOfWork | None:
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
        self.end_claim(solo)
        return units[0] if units else None

    def claim_failed(self, wanted: int, acks: list[UnitOfWork], solo: bool = False) -> None:
        """A claim's call failed after it may have reached Redis."""
        self.acks[:0] = acks  # sent again with the next call: an LREM repeats harmlessly
        self.held -= wanted
        self.lost_reply()
        self.end_claim(solo)

    def adopted(self, uow: UnitOfWork) -> None:
        """A waiter claimed ``uow``: an idle thread takes it."""
        self.outstanding[(uow.private, uow.job)] = uow
        self.local.append(uow)
        if uow.alone:
            self.alone = uow
        self.work.notify()

    def end_claim(self, solo: bool = False) -> None:
        """A claim's call is over; ``solo`` for the one that could bring a
        lone suspect, which lets the others claim again."""
        if solo:
            self.end_solo()
        self.in_flight -= 1
        if self.reconciling and not self.in_flight:
            self.turns.notify_all()

    def close(self) -> None:
        """The fetcher stopped and gave everything back: it holds nothing,
        and the other fetchers of this process no longer wait for it."""
        self.outstanding.clear()
        self.held = 0
        self.release_alone()
        with self.gate.lock:
            self.gate.ledgers.discard(self)

    def end_solo(self) -> None:
        """The claim that could bring a lone suspect is over: others may claim
        unless it brought one."""
        self.solo = False
        if self.alone is None:
            self.gate.give_up(self)
        self.work.notify_all()
        self.wake.notify_all()

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
        if not self.solo:
            self.gate.give_up(self)
        self.work.notify_all()
        self.wake.notify_all()
