"""Poison-pill suspects, as the fetch sees them.

Jobs the reaper recovered from a dead process are *suspects* of its crash
(see :mod:`wurk.reaper`). Both claim paths, the ``core.fetch`` script and the
``core.adopt`` check after a waiter's ``BLMOVE``, mark a suspect in this
process's running-suspects set while it runs, so that if this process dies
too the reaper knows it was running and counts the recovery. A suspect
recovered twice or more runs *alone*: it is claimed only when this process
runs nothing else, and nothing else starts until it is done (the ledger's
``alone``, :mod:`wurk.fetch_claims`). So only a job that really was running at
each crash reaches the poison-pill threshold.

The scripts answer with a *mark* for each claimed job: ``0`` for an ordinary
job, ``"1:<id>"`` for a suspect, ``"2:<id>"`` for a suspect that must run
alone, and (``core.adopt`` only) ``-1`` for a suspect it gave back because it
could not run alone here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from wurk import keys
from wurk.payload import exact as text
from wurk.reaper import RECOVERY_TTL

if TYPE_CHECKING:
    from wurk.fetch import UnitOfWork
    from wurk.scripts import ScriptRegistry

#: ``core.adopt``'s mark for a suspect it gave back to its queue.
GIVEN_BACK = -1


def apply_mark(uow: UnitOfWork, mark: Any) -> None:
    """Record a suspect's mark (``"1:<id>"`` or ``"2:<id>"``) on its unit."""
    kind, _, uow.suspect = str(text(mark)).partition(":")
    uow.alone = kind == "2"


def adopt(
    scripts: ScriptRegistry,
    client: Any,
    running_key: str,
    public: str,
    private: str,
    job: str | bytes,
    alone_ok: bool,
) -> Any:
    """Check a job a waiter's ``BLMOVE`` just claimed: its mark, or
    :data:`GIVEN_BACK` for a suspect that may not run alone now."""
    return scripts.call(
        "core.adopt",
        client,
        [keys.SUSPECTS, running_key, public, private],
        [job, "1" if alone_ok else "0", RECOVERY_TTL],
    )
