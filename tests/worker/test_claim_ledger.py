"""The claim ledger's rule for lone suspects, with no server: it never talks to
one. A suspect recovered twice may run only alone in its process, so a claim
that may bring one must keep every other claim from starting until its reply
is in, in its own fetcher and in every other fetcher of the process."""

from __future__ import annotations

from wurk.fetch import UnitOfWork
from wurk.fetch.gate import SoloGate
from wurk.fetch.ledger import ClaimLedger


def locked(ledger: ClaimLedger, method: str, *args, **kwargs):
    """Calls a ledger method under the ledger's lock, as its callers do."""
    with ledger.lock:
        return getattr(ledger, method)(*args, **kwargs)


def suspect(alone: bool) -> UnitOfWork:
    return UnitOfWork("q", '{"jid":"j"}', "queue:q|h|1|n|0", fetcher=None, suspect="j", alone=alone)  # type: ignore[arg-type]


def test_a_claim_made_with_nothing_held_keeps_the_other_threads_from_claiming_until_its_reply():
    ledger = ClaimLedger(limit=4, gate=SoloGate())
    wanted, alone_ok, _ = locked(ledger, "plan", lambda: 0)
    assert alone_ok
    # Another thread wakes while that claim is in flight: it must not claim
    # a job that would run beside a lone suspect.
    assert locked(ledger, "plan", lambda: 0) is None
    assert not locked(ledger, "reserve_one", spare=0)
    lone = suspect(alone=True)
    assert locked(ledger, "claimed", wanted, [], [lone], solo=True) is lone
    assert locked(ledger, "plan", lambda: 0) is None  # the suspect runs alone
    locked(ledger, "settle", [lone])
    assert locked(ledger, "plan", lambda: 0) is not None


def test_a_claim_that_brought_no_lone_suspect_lets_the_others_claim_at_once():
    ledger = ClaimLedger(limit=4, gate=SoloGate())
    wanted, alone_ok, _ = locked(ledger, "plan", lambda: 0)
    assert alone_ok
    locked(ledger, "claimed", wanted, [], [suspect(alone=False)], solo=True)
    second = locked(ledger, "plan", lambda: 0)
    assert second is not None
    assert not second[1], "something is held now: nothing may run alone"


def test_a_failed_claim_that_could_bring_a_lone_suspect_frees_the_others():
    ledger = ClaimLedger(limit=4, gate=SoloGate())
    wanted, _, acks = locked(ledger, "plan", lambda: 0)
    locked(ledger, "claim_failed", wanted, acks, solo=True)
    ledger.suspect = False  # the reconcile ran
    assert locked(ledger, "plan", lambda: 0) is not None


def test_a_waiter_may_keep_a_lone_suspect_only_when_its_claim_is_all_the_process_holds():
    gate = SoloGate()
    ledger = ClaimLedger(limit=4, gate=gate)
    assert locked(ledger, "reserve_one", spare=0)
    assert locked(ledger, "plan", lambda: 0) is not None  # a thread claims beside the waiter
    assert not locked(ledger, "go_solo")


def test_a_lone_suspect_in_one_fetcher_stops_the_other_fetchers_of_the_process():
    gate = SoloGate()
    first, second = ClaimLedger(limit=4, gate=gate), ClaimLedger(limit=4, gate=gate)
    wanted, alone_ok, _ = locked(first, "plan", lambda: 0)
    assert alone_ok
    assert locked(second, "plan", lambda: 0) is None
    lone = suspect(alone=True)
    locked(first, "claimed", wanted, [], [lone], solo=True)
    assert locked(second, "plan", lambda: 0) is None
    assert not locked(second, "reserve_one", spare=0)
    locked(first, "settle", [lone])
    claim = locked(second, "plan", lambda: 0)
    assert claim is not None
    assert claim[1]


def test_no_fetcher_may_bring_a_lone_suspect_while_another_of_its_process_holds_a_job():
    gate = SoloGate()
    first, second = ClaimLedger(limit=4, gate=gate), ClaimLedger(limit=4, gate=gate)
    wanted, _, _ = locked(first, "plan", lambda: 0)
    locked(first, "claimed", wanted, [], [suspect(alone=False)], solo=True)
    claim = locked(second, "plan", lambda: 0)
    assert claim is not None
    assert not claim[1]
    locked(first, "close")
    locked(second, "claimed", claim[0], [], [], solo=claim[1])
    again = locked(second, "plan", lambda: 0)
    assert again is not None
    assert again[1], "a closed fetcher holds nothing"
