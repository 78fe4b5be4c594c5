"""The claim ledger, with no server: it never talks to one.

Each operation is called under the ledger's lock, as the fetch's parts call
it, and the ledger's invariants (:meth:`ClaimLedger.check`) are asserted after
every step: the bound holds, every job tracked is counted in ``held``, and
nothing claimed is neither queued to run nor running.

A suspect recovered twice may run only alone in its process, so a claim that
may bring one must keep every other claim from starting until its reply is
in, in its own fetcher and in every other fetcher of the process."""

from __future__ import annotations

import threading

import pytest

from tests.helpers import wait_for
from wurk.server.fetch import UnitOfWork
from wurk.server.fetch.gate import SoloGate
from wurk.server.fetch.ledger import ClaimLedger

PRIVATE = "queue:q|h|1|n|0"


def locked(ledger: ClaimLedger, method: str, *args, **kwargs):
    """Calls a ledger operation under the ledger's lock, as its callers do,
    then checks that the books still add up."""
    with ledger.lock:
        result = getattr(ledger, method)(*args, **kwargs)
        ledger.check()
    return result


def unit(jid: str = "j", *, suspect: str = "", alone: bool = False) -> UnitOfWork:
    return UnitOfWork("q", f'{{"jid":"{jid}"}}', PRIVATE, fetcher=None, suspect=suspect, alone=alone)  # type: ignore[arg-type]


def suspect(alone: bool) -> UnitOfWork:
    return unit("j", suspect="j", alone=alone)


def new_ledger(limit: int = 4, gate: SoloGate | None = None) -> ClaimLedger:
    ledger = ClaimLedger(limit=limit, gate=gate if gate is not None else SoloGate())
    with ledger.lock:
        ledger.check()
    return ledger


def no_prefetch() -> int:
    return 0


# -- the lone suspect -------------------------------------------------------------


def test_a_claim_made_with_nothing_held_keeps_the_other_threads_from_claiming_until_its_reply():
    ledger = new_ledger()
    wanted, alone_ok, _ = locked(ledger, "plan", no_prefetch)
    assert alone_ok
    # Another thread wakes while that claim is in flight: it must not claim
    # a job that would run beside a lone suspect.
    assert locked(ledger, "plan", no_prefetch) is None
    assert not locked(ledger, "reserve_one", spare=0)
    lone = suspect(alone=True)
    assert locked(ledger, "claimed", wanted, [], [lone], solo=True) is lone
    assert locked(ledger, "plan", no_prefetch) is None  # the suspect runs alone
    locked(ledger, "settle", [lone])
    assert locked(ledger, "plan", no_prefetch) is not None


def test_a_claim_that_brought_no_lone_suspect_lets_the_others_claim_at_once():
    ledger = new_ledger()
    wanted, alone_ok, _ = locked(ledger, "plan", no_prefetch)
    assert alone_ok
    locked(ledger, "claimed", wanted, [], [suspect(alone=False)], solo=True)
    second = locked(ledger, "plan", no_prefetch)
    assert second is not None
    assert not second[1], "something is held now: nothing may run alone"


def test_a_failed_claim_that_could_bring_a_lone_suspect_frees_the_others():
    ledger = new_ledger()
    wanted, _, acks = locked(ledger, "plan", no_prefetch)
    locked(ledger, "claim_failed", wanted, acks, solo=True)
    assert ledger.suspect
    generation, keep, unmark = locked(ledger, "start_reconcile")
    assert (keep, unmark) == (set(), [])
    locked(ledger, "reconciled", generation)
    locked(ledger, "end_reconcile")
    assert not ledger.suspect
    assert locked(ledger, "plan", no_prefetch) is not None


def test_a_waiter_may_keep_a_lone_suspect_only_when_its_claim_is_all_the_process_holds():
    ledger = new_ledger()
    assert locked(ledger, "reserve_one", spare=0)
    assert locked(ledger, "plan", no_prefetch) is not None  # a thread claims beside the waiter
    assert not locked(ledger, "go_solo")


def test_a_lone_suspect_in_one_fetcher_stops_the_other_fetchers_of_the_process():
    gate = SoloGate()
    first, second = new_ledger(gate=gate), new_ledger(gate=gate)
    wanted, alone_ok, _ = locked(first, "plan", no_prefetch)
    assert alone_ok
    assert locked(second, "plan", no_prefetch) is None
    lone = suspect(alone=True)
    locked(first, "claimed", wanted, [], [lone], solo=True)
    assert locked(second, "plan", no_prefetch) is None
    assert not locked(second, "reserve_one", spare=0)
    locked(first, "settle", [lone])
    claim = locked(second, "plan", no_prefetch)
    assert claim is not None
    assert claim[1]


def test_no_fetcher_may_bring_a_lone_suspect_while_another_of_its_process_holds_a_job():
    gate = SoloGate()
    first, second = new_ledger(gate=gate), new_ledger(gate=gate)
    wanted, _, _ = locked(first, "plan", no_prefetch)
    locked(first, "claimed", wanted, [], [suspect(alone=False)], solo=True)
    claim = locked(second, "plan", no_prefetch)
    assert claim is not None
    assert not claim[1]
    locked(first, "close")
    locked(second, "claimed", claim[0], [], [], solo=claim[1])
    again = locked(second, "plan", no_prefetch)
    assert again is not None
    assert again[1], "a closed fetcher holds nothing"


def test_a_waiter_that_adopts_a_lone_suspect_runs_it_alone_until_its_window_passes():
    ledger = new_ledger()
    assert locked(ledger, "reserve_one", spare=0)
    assert locked(ledger, "go_solo")
    lone = suspect(alone=True)
    locked(ledger, "adopted", lone)
    locked(ledger, "end_solo")
    locked(ledger, "end_claim")
    assert ledger.alone is lone
    assert ledger.gate.owner is ledger, "its process's other fetchers wait for it too"
    assert locked(ledger, "next_local") is lone
    assert locked(ledger, "plan", no_prefetch) is None
    locked(ledger, "window_passed", unit("other"))  # another job's window: nothing changes
    assert ledger.alone is lone
    locked(ledger, "window_passed", lone)
    assert ledger.alone is None
    assert ledger.gate.owner is None
    assert locked(ledger, "plan", no_prefetch) is not None


def test_closing_with_a_lone_suspect_running_frees_the_process():
    gate = SoloGate()
    first, second = new_ledger(gate=gate), new_ledger(gate=gate)
    wanted, alone_ok, _ = locked(first, "plan", no_prefetch)
    assert alone_ok
    locked(first, "claimed", wanted, [], [suspect(alone=True)], solo=True)
    assert locked(second, "plan", no_prefetch) is None
    locked(first, "close")
    assert (first.held, first.outstanding, first.running, first.alone) == (0, {}, set(), None)
    assert locked(second, "plan", no_prefetch) is not None


# -- claims, the local buffer and acknowledgements ----------------------------------


def test_a_claim_asks_for_each_idle_thread_and_keeps_the_rest_for_them():
    ledger = new_ledger(limit=6)
    for _ in range(2):
        locked(ledger, "thread_idles")
    wanted, alone_ok, acks = locked(ledger, "plan", lambda: 1)
    assert (wanted, acks) == (4, [])  # the caller, two idle threads, one ahead
    assert (ledger.held, ledger.in_flight) == (4, 1)
    units = [unit(f"j{n}") for n in range(3)]
    assert locked(ledger, "claimed", wanted, [], units, alone_ok) is units[0]
    assert ledger.held == 3, "the room the claim did not fill is free again"
    assert list(ledger.local) == units[1:]
    assert ledger.running == {units[0]}
    assert not ledger.empty
    for _ in range(2):
        locked(ledger, "thread_wakes")
    assert [locked(ledger, "next_local") for _ in range(3)] == [units[1], units[2], None]
    assert ledger.running == set(units)


def test_a_claim_never_passes_the_bound():
    ledger = new_ledger(limit=2)
    wanted, alone_ok, _ = locked(ledger, "plan", lambda: 10)
    assert wanted == 2
    locked(ledger, "claimed", wanted, [], [unit("a"), unit("b")], alone_ok)
    assert locked(ledger, "plan", lambda: 10) is None
    assert not locked(ledger, "reserve_one", spare=0)


def test_a_job_lent_to_the_event_loop_widens_the_bound_until_it_leaves_the_private_list():
    ledger = new_ledger(limit=2)
    wanted, alone_ok, _ = locked(ledger, "plan", lambda: 10)
    first, second = unit("a"), unit("b")
    locked(ledger, "claimed", wanted, [], [first, second], alone_ok)
    assert locked(ledger, "plan", lambda: 10) is None, "full: two held of two"
    locked(ledger, "lend", first)
    wanted, alone_ok, _ = locked(ledger, "plan", lambda: 10)
    assert wanted == 1, "the async job's room is lent, one more may come"
    third = unit("c")
    locked(ledger, "claimed", wanted, [], [third], alone_ok)
    locked(ledger, "acknowledged", first)
    assert ledger.lent == {first}, "still in the private list until its LREM is sent"
    assert locked(ledger, "plan", lambda: 10) == (0, False, [first])
    locked(ledger, "claimed", 0, [first], [], False)
    assert ledger.lent == set()
    assert ledger.held == 2
    assert locked(ledger, "plan", lambda: 10) is None, "back to the threads' bound"


def test_an_abandoned_lent_job_is_no_longer_lent():
    ledger = new_ledger(limit=1)
    wanted, alone_ok, _ = locked(ledger, "plan", no_prefetch)
    job = unit("a")
    locked(ledger, "claimed", wanted, [], [job], alone_ok)
    locked(ledger, "lend", job)
    locked(ledger, "abandoned", job)
    assert ledger.lent == set()


def test_a_claim_that_finds_nothing_marks_the_queues_empty():
    ledger = new_ledger()
    wanted, alone_ok, _ = locked(ledger, "plan", no_prefetch)
    assert locked(ledger, "claimed", wanted, [], [], alone_ok) is None
    assert ledger.empty
    assert (ledger.held, ledger.in_flight) == (0, 0)


def test_acknowledgements_travel_with_the_next_claim_and_free_their_room():
    ledger = new_ledger(limit=2)
    wanted, alone_ok, _ = locked(ledger, "plan", lambda: 1)
    first, second = unit("a"), unit("b")
    locked(ledger, "claimed", wanted, [], [first, second], alone_ok)
    locked(ledger, "next_local")
    locked(ledger, "acknowledged", first)
    locked(ledger, "acknowledged", second)
    assert ledger.held == 2, "acknowledged but not yet removed from the private list"
    wanted, alone_ok, acks = locked(ledger, "plan", lambda: 1)
    assert (wanted, acks) == (2, [first, second])
    assert (ledger.held, ledger.sending) == (4, 2), "the bound counts the acknowledgements in flight"
    fresh = unit("c")
    assert locked(ledger, "claimed", wanted, acks, [fresh], alone_ok) is fresh
    assert (ledger.held, ledger.sending) == (1, 0)
    assert ledger.outstanding == {(PRIVATE, fresh.job): fresh}
    assert ledger.running == {fresh}


def test_a_failed_claim_keeps_its_acknowledgements_for_the_next_call():
    ledger = new_ledger()
    wanted, alone_ok, _ = locked(ledger, "plan", no_prefetch)
    done = unit("done")
    locked(ledger, "claimed", wanted, [], [done], alone_ok)
    locked(ledger, "acknowledged", done)
    wanted, alone_ok, acks = locked(ledger, "plan", no_prefetch)
    assert acks == [done]
    locked(ledger, "claim_failed", wanted, acks, alone_ok)
    assert ledger.acks == [done]
    assert (ledger.held, ledger.sending, ledger.in_flight) == (1, 0, 0)
    assert ledger.suspect


def test_a_flush_sends_only_the_acknowledgements_held_back():
    ledger = new_ledger()
    assert locked(ledger, "start_flush") == []
    assert ledger.in_flight == 0, "nothing to send: no call"
    wanted, alone_ok, _ = locked(ledger, "plan", no_prefetch)
    done = unit("done")
    locked(ledger, "claimed", wanted, [], [done], alone_ok)
    locked(ledger, "acknowledged", done)
    assert locked(ledger, "start_flush") == [done]
    assert (ledger.in_flight, ledger.sending, ledger.acks) == (1, 1, [])
    assert locked(ledger, "claimed", 0, [done], []) is None
    assert (ledger.held, ledger.outstanding, ledger.running) == (0, {}, set())
    assert not ledger.empty, "a claim of nothing says nothing of the queues"


def test_jobs_no_thread_started_are_handed_over_to_be_given_back():
    ledger = new_ledger()
    locked(ledger, "thread_idles")
    wanted, alone_ok, _ = locked(ledger, "plan", no_prefetch)
    units = [unit("a"), unit("b")]
    locked(ledger, "claimed", wanted, [], units, alone_ok)
    locked(ledger, "thread_wakes")
    assert locked(ledger, "take_unstarted") == [units[1]]
    assert not ledger.local
    locked(ledger, "settle", units)  # both given back to their queue
    assert (ledger.held, ledger.outstanding, ledger.running) == (0, {}, set())


def test_a_quiet_stops_every_claim():
    ledger = new_ledger()
    locked(ledger, "quiet")
    assert ledger.stopping.is_set()
    assert locked(ledger, "plan", no_prefetch) is None


# -- a waiter's claim of one job -----------------------------------------------------


def test_a_waiter_keeps_spare_room_for_the_thread_it_wakes():
    ledger = new_ledger(limit=2)
    assert locked(ledger, "reserve_one", spare=1)
    assert not locked(ledger, "reserve_one", spare=1)
    assert locked(ledger, "reserve_one", spare=0)
    assert (ledger.held, ledger.in_flight) == (2, 2)


@pytest.mark.parametrize(
    ("outcome", "lost"),
    [("blocked_claim_came_back_empty", False), ("blocked_claim_gave_back", False), ("blocked_claim_lost", True)],
)
def test_a_waiters_claim_that_keeps_nothing_frees_its_room(outcome, lost):
    ledger = new_ledger()
    assert locked(ledger, "reserve_one", spare=0)
    locked(ledger, outcome)
    locked(ledger, "end_claim")
    assert (ledger.held, ledger.in_flight) == (0, 0)
    assert ledger.suspect is lost


def test_a_waiters_job_waits_for_an_idle_thread():
    ledger = new_ledger()
    assert locked(ledger, "reserve_one", spare=0)
    job = unit("w")
    locked(ledger, "adopted", job)
    locked(ledger, "end_claim")
    assert list(ledger.local) == [job]
    assert locked(ledger, "next_local") is job
    assert ledger.running == {job}


# -- lost replies, abandoned jobs and the reconcile ------------------------------------


def test_an_abandoned_job_is_left_for_the_reconcile_to_give_back():
    ledger = new_ledger()
    wanted, alone_ok, _ = locked(ledger, "plan", lambda: 1)
    kept, dropped = unit("kept"), unit("dropped", suspect="dropped")
    locked(ledger, "claimed", wanted, [], [dropped, kept], alone_ok)
    locked(ledger, "next_local")
    locked(ledger, "abandoned", dropped)
    assert ledger.suspect
    assert ledger.held == 2, "still in the private list until the reconcile moves it"
    generation, keep, unmark = locked(ledger, "start_reconcile")
    assert keep == {(PRIVATE, kept.job)}
    assert unmark == ["dropped"]
    assert locked(ledger, "start_reconcile") is None, "one reconcile at a time"
    assert locked(ledger, "plan", no_prefetch) is None, "no claim during a reconcile"
    locked(ledger, "reconciled", generation)
    locked(ledger, "end_reconcile")
    assert (ledger.suspect, ledger.held, ledger.unmark) == (False, 1, [])


def test_abandoning_the_lone_suspect_frees_the_others():
    ledger = new_ledger()
    wanted, _, _ = locked(ledger, "plan", no_prefetch)
    lone = suspect(alone=True)
    locked(ledger, "claimed", wanted, [], [lone], solo=True)
    locked(ledger, "abandoned", lone)
    assert ledger.alone is None
    assert ledger.gate.owner is None


def test_a_reply_lost_during_a_reconcile_is_owed_another():
    ledger = new_ledger()
    locked(ledger, "lost_reply")
    generation, _, _ = locked(ledger, "start_reconcile")
    locked(ledger, "abandoned", unit("late"))  # not covered by this reconcile
    locked(ledger, "reconciled", generation)
    locked(ledger, "end_reconcile")
    assert ledger.suspect


def run_aside(action) -> threading.Thread:
    thread = threading.Thread(target=action, daemon=True)
    thread.start()
    return thread


def test_a_reconcile_waits_for_the_claims_in_flight_and_a_flush_for_the_reconcile():
    ledger = new_ledger()
    wanted, alone_ok, _ = locked(ledger, "plan", no_prefetch)
    locked(ledger, "lost_reply")
    started: list = []
    reconcile = run_aside(lambda: started.append(locked(ledger, "start_reconcile")))
    wait_for(lambda: ledger.reconciling)
    assert reconcile.is_alive(), "a claim is still in flight"
    job = unit("in-transit")
    locked(ledger, "claimed", wanted, [], [job], alone_ok)
    reconcile.join(10)
    assert started[0][1] == {(PRIVATE, job.job)}, "what arrived is not a leftover"
    locked(ledger, "acknowledged", job)
    flushed: list = []
    flush = run_aside(lambda: flushed.append(locked(ledger, "start_flush")))
    flush.join(0.2)
    assert flush.is_alive(), "no acknowledgement leaves during a reconcile"
    locked(ledger, "reconciled", started[0][0])
    locked(ledger, "end_reconcile")
    flush.join(10)
    assert flushed == [[job]]


# -- the check itself ---------------------------------------------------------------------


def test_the_check_catches_books_that_do_not_add_up():
    ledger = new_ledger()
    with ledger.lock:
        ledger.settle([unit("never-claimed")])  # a job given back twice
        with pytest.raises(AssertionError, match="held -1"):
            ledger.check()
    other = new_ledger()
    with other.lock:
        other.thread_wakes()
        with pytest.raises(AssertionError, match="idle is -1"):
            other.check()
    third = new_ledger()
    with third.lock:
        third.adopted(unit("w"))  # a waiter's job with no room reserved
        with pytest.raises(AssertionError, match="held 0 < 1 outstanding"):
            third.check()
    fourth = new_ledger()
    with fourth.lock:
        job = unit("w")
        for _ in range(2):
            fourth.reserve_one(spare=0)
            fourth.adopted(job)  # the same job handed over twice
        with pytest.raises(AssertionError, match="twice in the local buffer"):
            fourth.check()
    fifth = new_ledger()
    with fifth.lock:
        wanted, alone_ok, _ = fifth.plan(no_prefetch)
        assert alone_ok
        fifth.claimed(wanted, [], [])  # the claim's solo never ended
        with pytest.raises(AssertionError, match="solo True, with no claim in flight"):
            fifth.check()
