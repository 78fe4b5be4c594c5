"""The solo gate: a lone suspect is alone in its *process*.

A suspect recovered twice or more may run only when nothing else runs beside
it, or a crash another job caused would be counted against it. A process may
run several fetchers (capsules, an embedded worker beside another), and a
crash takes them all, so each fetcher's claim ledger
(:class:`~wurk.server.fetch.ledger.ClaimLedger`) asks this gate, shared by every
fetcher of the process, before it claims: one ledger at a time may claim a
lone suspect, only while no other holds a job, and the others claim nothing
until that suspect is done.
"""

from __future__ import annotations

import os
import threading
import weakref
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from wurk.server.fetch.ledger import ClaimLedger


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
        if self.owner is not None:
            return False
        # Most processes have one fetcher: no need to walk the weak set then
        # (every claim made with nothing held comes here, one per batch).
        if len(self.ledgers) > 1 and any(other.held for other in self.ledgers if other is not ledger):
            return False
        self.owner = ledger
        return True

    def give_up(self, ledger: ClaimLedger) -> None:
        with self.lock:
            if self.owner is ledger:
                self.owner = None


def process_gate() -> SoloGate:
    """The gate every fetcher of this process shares (a new one after a fork)."""
    return _process_gate


def _new_gate() -> None:
    global _process_gate
    _process_gate = SoloGate()  # a forked child runs none of its parent's jobs


_process_gate = SoloGate()
os.register_at_fork(after_in_child=_new_gate)
