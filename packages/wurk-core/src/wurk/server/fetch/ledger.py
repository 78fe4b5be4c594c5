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
* the claimed jobs no thread has started (``local``), those handed to a
  thread (``running``), the acknowledgements not yet sent (``acks``), and
  every job claimed and neither acknowledged nor given back
  (``outstanding``: what a reconcile must leave where it is);
* the lone suspect (``alone``): while a suspect recovered twice runs, nothing
  else starts and nothing more is claimed; and while a claim that may bring
  one is in flight (``solo``: a claim made with nothing held), no other claim
  starts, or a job claimed beside it would run next to the lone suspect and a
  crash it caused would be counted against the suspect. "Alone" is
  process-wide: every ledger of the process asks one
  :class:`~wurk.server.fetch.gate.SoloGate`;
* the lost-reply flag (``suspect``) that sends the next claim through a
  reconcile first (:mod:`wurk.server.fetch.reconcile`).

Only the ledger changes its fields: the other parts of the fetch say what
happened through its operations (:meth:`ClaimLedger.claimed`,
:meth:`ClaimLedger.abandoned`, :meth:`ClaimLedger.blocked_claim_came_back_empty`
...), and may read its fields. Every field is read and every operation called
with ``lock`` held: the callers take the lock once around a few steps that
must happen together. :meth:`ClaimLedger.check` asserts the books add up.
The ledger never talks to Redis.
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from wurk.server.fetch.gate import SoloGate, process_gate

if TYPE_CHECKING:
    from wurk.server.fetch.unit import UnitOfWork


#: What a claim was given room for: how many jobs, whether one may run alone,
#: and the acknowledgements that travel with it.
ClaimPlan = tuple[int, bool, list["UnitOfWork"]]

#: What a reconcile starts from: the lost replies it covers, the jobs it must
#: leave in the private lists, and the suspect ids it must unmark.
ReconcilePlan = tuple[int, set[tuple[str, str | bytes]], list[str]]


class ClaimLedger:
    """The bound, the reservations and the claimed jobs of one fetcher."""

    def __init__(self, limit: int, gate: SoloGate | None = None) -> None:
        self.limit = limit
        self.gate = gate if gate is not None else process_gate()
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
        #: Processor threads waiting for a job.
        self.idle = 0
        #: Idle threads woken for a job that have not yet taken the lock (see :meth:`wake_one`).
        self.waking = 0
        #: Processor threads blocked in a claim of their own (one queue only).
        self.blocking = 0
        #: Claims whose call is under way; a reconcile waits for none.
        self.in_flight = 0
        #: Acknowledgements travelling with the claims in flight: their jobs
        #: are still counted in ``held`` until the reply is in.
        self.sending = 0
        self.reconciling = False
        #: A reply was lost: a reconcile runs before the next claim.
        self.suspect = False
        #: Counts lost replies, so a reconcile clears only what it covered.
        self.generation = 0
        self.alone: UnitOfWork | None = None
        #: A claim allowed to bring a lone suspect is in flight.
        self.solo = False
        #: A claim was turned away while ``solo``: its end wakes the idle threads.
        self.solo_refused = False
        #: Suspect ids of abandoned jobs, to clear from the running set.
        self.unmark: list[str] = []
        self.local: collections.deque[UnitOfWork] = collections.deque()
        #: Claimed jobs handed to a thread (to run, or at shutdown to give
        #: back), until their acknowledgement is sent or they are given back.
        self.running: set[UnitOfWork] = set()
        #: Running jobs handed to the event loop (``async def perform``),
        #: until they leave the private list: their threads claim again, so
        #: each widens the bound by one while it is held.
        self.lent: set[UnitOfWork] = set()
        #: The claim-ahead room async jobs add (see :meth:`bound`); the fetcher sets it.
        self.lent_ahead = 0
        self.acks: list[UnitOfWork] = []
        #: Every claimed job not yet acknowledged or given back, by (private
        #: list, job).
        self.outstanding: dict[tuple[str, str | bytes], UnitOfWork] = {}

    # -- processor threads ------------------------------------------------------

    def next_local(self) -> UnitOfWork | None:
        """A claimed job no thread has started, now the caller's; while a
        suspect must run alone, only that one."""
        if self.alone is None:
            uow = self.local.popleft() if self.local else None
        elif self.alone in self.local:
            self.local.remove(self.alone)
            uow = self.alone
        else:
            uow = None
        if uow is not None:
            self.running.add(uow)
            if self.local:
                self.wake_one()
        return uow

    def wake_one(self) -> None:
        """Wake an idle thread for the jobs in the local buffer, unless one
        is waking already: the thread that takes a job wakes the next, so
        idle threads join one at a time, and only while jobs are left.

        Waking them all for a claim's jobs cost every one of them two
        context switches a claim on a drain of short jobs: the thread that
        made the claim holds the GIL and runs the jobs itself before the
        others get to them. Jobs that wait on I/O hand the GIL over at
        once, and the threads join as fast as jobs are taken."""
        if self.idle > self.waking and not self.waking:
            self.waking += 1
            self.work.notify()

    def thread_idles(self) -> None:
        """A processor thread found no job and waits on ``work``."""
        self.idle += 1

    def thread_wakes(self) -> None:
        """A thread that waited on ``work`` stopped waiting."""
        self.idle -= 1
        if self.waking:
            self.waking -= 1

    def bound(self, lent: int) -> int:
        """How many jobs may be held with ``lent`` of them on the event loop:
        ``limit``, each lent job's own room, and, while jobs are lent, up to
        ``lent_ahead`` more, so that the jobs waiting for the loop are
        claimed a handful per call rather than one or two."""
        return self.limit + lent + min(lent, self.lent_ahead)

    def lend(self, uow: UnitOfWork) -> None:
        """``uow`` runs on the event loop: its thread is free to claim, and
        the bound grows by one until the job leaves the private list."""
        self.lent.add(uow)

    def acknowledged(self, uow: UnitOfWork) -> None:
        """``uow`` is done: its ``LREM`` travels with the next claim."""
        self.acks.append(uow)

    def take_unstarted(self) -> list[UnitOfWork]:
        """The caller takes every claimed job no thread has started (to give
        them back)."""
        units = list(self.local)
        self.local.clear()
        self.running.update(units)
        return units

    def quiet(self) -> None:
        """Nothing more is claimed (one-way); idle threads and waiters return."""
        self.stopping.set()
        self.work.notify_all()
        self.wake.notify_all()

    # -- claims -----------------------------------------------------------------

    def plan(self, prefetch: Callable[[], int]) -> ClaimPlan | None:
        """Reserve room for a claim under the bound: how many jobs (one for
        the calling thread, one per idle thread, and the prefetch), whether
        one may run alone, and the acknowledgements that go with it."""
        if self.solo:
            self.solo_refused = True
            return None
        if self.alone is not None or self.reconciling or self.stopping.is_set():
            return None
        with self.gate.lock:
            if self.gate.blocks(self):
                return None
            acks, self.acks = self.acks, []
            base = self.held - len(acks)
            # An acknowledged async job leaves with this call: its lent room goes with it.
            lent = len(self.lent) - sum(1 for uow in acks if uow in self.lent) if self.lent else 0
            # No claim ahead while threads block on the queue themselves: what
            # they would find in the local buffer they see only once unblocked.
            ahead = 0 if self.blocking else prefetch()
            wanted = max(0, min(1 + self.idle + ahead, self.bound(lent) - base))
            if not wanted and not acks:
                return None
            self.held += wanted
            self.in_flight += 1
            self.sending += len(acks)
            self.solo = alone_ok = base == 0 and wanted > 0 and self.gate.take(self)
        return wanted, alone_ok, acks

    def start_flush(self) -> list[UnitOfWork]:
        """A claim of nothing that only sends the acknowledgements held back:
        once no reconcile runs, take them (none: no call to make)."""
        while self.reconciling:
            self.turns.wait()
        if not self.acks:
            return []
        acks, self.acks = self.acks, []
        self.in_flight += 1
        self.sending += len(acks)
        return acks

    def claimed(
        self, wanted: int, acks: list[UnitOfWork], units: list[UnitOfWork], solo: bool = False
    ) -> UnitOfWork | None:
        """A claim's reply is in: ``acks`` left the private lists and
        ``units`` arrived; the first is the caller's, the others wait for
        idle threads."""
        self.sending -= len(acks)
        self.settle(acks)
        self.held -= wanted - len(units)
        if wanted:
            self.empty = not units
        for uow in units:
            self.outstanding[(uow.private, uow.job)] = uow
        if units and units[0].alone:
            self.alone = units[0]
        self.local.extend(units[1:])
        if len(units) < wanted:
            # The queues ran short: every idle thread looks again (for a
            # blocking claim of its own, or to let the waiters block).
            self.work.notify_all()
        else:
            self.wake_one()
        self.end_claim(solo)
        if not units:
            return None
        self.running.add(units[0])
        return units[0]

    def claim_failed(self, wanted: int, acks: list[UnitOfWork], solo: bool = False) -> None:
        """A claim's call failed after it may have reached Redis."""
        self.sending -= len(acks)
        self.acks[:0] = acks  # sent again with the next call: an LREM repeats harmlessly
        self.held -= wanted
        self.lost_reply()
        self.end_claim(solo)

    def end_claim(self, solo: bool = False) -> None:
        """A claim's call is over; ``solo`` for the one that could bring a
        lone suspect, which lets the others claim again."""
        if solo:
            self.end_solo()
        self.in_flight -= 1
        if self.reconciling and not self.in_flight:
            self.turns.notify_all()

    def lost_reply(self) -> None:
        """What a failed call claimed, if anything, is found and given back
        before the next claim."""
        self.suspect = True
        self.generation += 1

    # -- waiters' claims of one job -------------------------------------------------

    def reserve_one(self, spare: int) -> bool:
        """Room for a waiter's claim of one job, keeping ``spare`` slots free."""
        if self.solo:
            self.solo_refused = True
            return False
        if self.held + 1 + spare > self.bound(len(self.lent)) or self.reconciling:
            return False
        with self.gate.lock:
            if self.gate.blocks(self):
                return False
            self.held += 1
        self.in_flight += 1
        return True

    def reserve_own(self) -> bool:
        """Room for a thread's own blocking claim of one job, taken only while
        every queue was found empty, nothing waits in the local buffer and no
        suspect runs alone; the thread counts as ``blocking`` until
        :meth:`end_own`."""
        if not self.empty or self.local or self.alone is not None or self.stopping.is_set():
            return False
        if not self.reserve_one(0):
            return False
        self.blocking += 1
        return True

    def end_own(self) -> None:
        """A thread's own blocking claim is over."""
        self.blocking -= 1
        self.end_claim()

    def took(self, uow: UnitOfWork) -> None:
        """A thread's own blocking claim brought ``uow``, which it runs now."""
        self.outstanding[(uow.private, uow.job)] = uow
        self.running.add(uow)
        if uow.alone:
            self.alone = uow

    def blocked_claim_came_back_empty(self) -> None:
        """A waiter's ``BLMOVE`` timed out with nothing: its room is free."""
        self.held -= 1

    def blocked_claim_gave_back(self) -> None:
        """A waiter put the job it claimed straight back on its queue (quieted
        meanwhile, or a suspect that may not run alone now)."""
        self.held -= 1

    def blocked_claim_lost(self) -> None:
        """A waiter's ``BLMOVE`` failed: it may have moved a job, which the
        reconcile finds; its room is free."""
        self.held -= 1
        self.lost_reply()

    def go_solo(self) -> bool:
        """A waiter's claimed job may run alone if it is all this process
        holds; if so, no other claim starts until :meth:`end_solo`."""
        if self.solo or self.held != 1 or self.in_flight != 1:
            return False
        with self.gate.lock:
            self.solo = self.gate.take(self)
        return self.solo

    def adopted(self, uow: UnitOfWork) -> None:
        """A waiter claimed ``uow``: an idle thread takes it."""
        self.outstanding[(uow.private, uow.job)] = uow
        self.local.append(uow)
        if uow.alone:
            self.alone = uow
        self.work.notify()

    def end_solo(self) -> None:
        """The claim that could bring a lone suspect is over: others may claim
        unless it brought one."""
        self.solo = False
        if self.alone is None:
            self.gate.give_up(self)
        # Only the threads it turned away look again: a solo claim is every
        # claim made with nothing held, one per batch of a drain, and waking
        # every idle thread for each cost each of them two context switches
        # for nothing (a claim's own jobs wake the threads they are for).
        if self.solo_refused:
            self.solo_refused = False
            if self.local:
                self.wake_one()
            else:
                self.work.notify_all()
        self.wake.notify_all()

    # -- giving back ------------------------------------------------------------

    def settle(self, units: list[UnitOfWork]) -> None:
        """These jobs have left the private list: stop tracking them."""
        for uow in units:
            self.outstanding.pop((uow.private, uow.job), None)
            self.running.discard(uow)
            self.held -= 1
            if uow is self.alone:
                self._release_alone()
        if self.lent:
            self.lent.difference_update(units)

    def abandoned(self, uow: UnitOfWork) -> None:
        """``uow`` was neither finished nor booked: it stays in the private
        list, untracked, and the next claim's reconcile gives it back (and
        unmarks it, for a suspect)."""
        self.outstanding.pop((uow.private, uow.job), None)
        self.running.discard(uow)
        self.lent.discard(uow)
        if uow.suspect:
            self.unmark.append(uow.suspect)
        self.lost_reply()
        if uow is self.alone:
            self._release_alone()

    def window_passed(self, uow: UnitOfWork) -> None:
        """``uow``, a suspect, outlived its poison-pill window and its mark is
        off: if it ran alone, the others resume."""
        if uow is self.alone:
            self._release_alone()

    def start_reconcile(self) -> ReconcilePlan | None:
        """Begin a reconcile once the claims in flight end (``None``: one is
        already under way); no claim starts until :meth:`end_reconcile`."""
        if self.reconciling:
            return None
        self.reconciling = True
        while self.in_flight:
            self.turns.wait()
        unmark, self.unmark = self.unmark, []
        return self.generation, set(self.outstanding), unmark

    def reconciled(self, generation: int) -> None:
        """Everything but the outstanding jobs is back on its queue: they are
        all this process holds, and unless a reply was lost meanwhile
        (``generation`` moved) no reconcile is owed."""
        if self.generation == generation:
            self.suspect = False
        self.held = len(self.outstanding)

    def end_reconcile(self) -> None:
        """The reconcile is over, done or not: claims may start again."""
        self.reconciling = False
        self.turns.notify_all()
        self.wake.notify_all()

    def close(self) -> None:
        """The fetcher stopped and gave everything back: it holds nothing,
        and the other fetchers of this process no longer wait for it."""
        self.outstanding.clear()
        self.running.clear()
        self.lent.clear()
        self.held = 0
        self._release_alone()
        with self.gate.lock:
            self.gate.ledgers.discard(self)

    def _release_alone(self) -> None:
        """The lone suspect is done: the other threads and the waiters resume."""
        self.alone = None
        if not self.solo:
            self.gate.give_up(self)
        self.work.notify_all()
        self.wake.notify_all()

    # -- invariants ---------------------------------------------------------------

    def check(self) -> None:
        """Raise :class:`AssertionError` unless the books add up (lock held).

        The bound holds (``held`` exceeds ``limit`` only by the
        acknowledgements in flight, whose jobs are still in the private
        lists, and by the jobs lent to the event loop), every job tracked is counted in ``held``, and nothing claimed
        is neither queued to run (``local``) nor handed to a thread
        (``running``). Tests call it after each step.
        """
        failures: list[str] = []
        bound = self.bound(len(self.lent))
        if not 0 <= self.held - self.sending <= bound:
            failures.append(f"held {self.held} - sending {self.sending} outside 0..{bound}")
        if not self.lent <= set(self.outstanding.values()):
            failures.append("a job lent to the event loop is not outstanding")
        if self.held < len(self.outstanding):
            failures.append(f"held {self.held} < {len(self.outstanding)} outstanding")
        if self.blocking > self.in_flight:
            failures.append(f"blocking {self.blocking} > {self.in_flight} claims in flight")
        for name in ("idle", "blocking", "in_flight", "sending"):
            if getattr(self, name) < 0:
                failures.append(f"{name} is {getattr(self, name)}")
        if (self.sending or self.solo) and not self.in_flight:
            failures.append(f"sending {self.sending}, solo {self.solo}, with no claim in flight")
        local = set(self.local)
        if len(local) != len(self.local):
            failures.append("a job is twice in the local buffer")
        for uow in local | self.running:
            if (uow.private, uow.job) not in self.outstanding:
                failures.append(f"{uow.job!r} is local or running but not outstanding")
        if local & self.running:
            failures.append("a job is both in the local buffer and running")
        for uow in self.outstanding.values():
            if uow not in local and uow not in self.running:
                failures.append(f"{uow.job!r} is claimed but neither local nor running")
        if self.alone is not None and (self.alone.private, self.alone.job) not in self.outstanding:
            failures.append("the lone suspect is not outstanding")
        with self.gate.lock:
            owner = self.gate.owner is self
        if owner != (self.solo or self.alone is not None):
            failures.append(f"gate owner {owner}, solo {self.solo}, alone {self.alone is not None}")
        if failures:
            raise AssertionError("claim ledger: " + "; ".join(failures))
