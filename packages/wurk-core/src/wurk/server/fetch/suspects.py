"""Poison-pill suspects, as the fetch sees them.

Jobs the reaper recovered from a dead process are *suspects* of its crash
(see :mod:`wurk.server.reaper`). Both claim paths, the ``core.fetch`` script and the
``core.adopt`` check after a waiter's ``BLMOVE``, mark a suspect in this
process's running-suspects set while it runs, so that if this process dies
too the reaper knows it was running and counts the recovery. A suspect
recovered twice or more runs *alone*: it is claimed only when this process
runs nothing else, and nothing else starts until it is done (the ledger's
``alone``, :mod:`wurk.server.fetch.ledger`). So only a job that really was running at
each crash reaches the poison-pill threshold.

The scripts answer with a *mark* for each claimed job: ``0`` for an ordinary
job, ``"1:<id>"`` for a suspect, ``"2:<id>"`` for a suspect that must run
alone, and (``core.adopt`` only) ``-1`` for a suspect it gave back because it
could not run alone here.

A suspect is marked only while it is *young*: once it has run
``poison_pill_window`` seconds (10 by default), the :class:`SuspectClock`
takes its mark off, and a suspect running alone lets the others resume. A
poison pill kills its process soon after it starts; a job killed after
running that long was more likely the victim of something else (an
out-of-memory kill aimed at the whole process, a lost node, a deploy), so
that crash is not counted against it.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from wurk.client.payload import exact as text
from wurk.redis import keys
from wurk.server.reaper import RECOVERY_TTL

if TYPE_CHECKING:
    from wurk.config.configuration import Config
    from wurk.redis.connection import RedisPool
    from wurk.redis.scripts import ScriptRegistry
    from wurk.server.fetch.ledger import ClaimLedger
    from wurk.server.fetch.unit import UnitOfWork

#: ``core.adopt``'s mark for a suspect it gave back to its queue.
GIVEN_BACK = -1
#: Seconds a suspect stays marked once it starts (``poison_pill_window``).
POISON_PILL_WINDOW = 10.0
#: Seconds before a failed unmarking is tried again.
RETRY_PAUSE = 1.0


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


class SuspectClock:
    """Takes a running suspect's mark off once it has run ``poison_pill_window``
    seconds, so that a later crash of its process is not counted against it,
    and ends its lone run so that the other threads resume.

    Suspects are rare (only jobs recovered from a crash), so each running one
    has a timer thread of its own; ordinary jobs cost nothing. The mark comes
    off in Redis before the lone run ends here: while it is on, nothing else
    runs beside the suspect, so a crash in that time is still its own.
    """

    def __init__(self, config: Config, ledger: ClaimLedger, pool: RedisPool, running_key: str) -> None:
        self.config = config
        self.ledger = ledger
        self.pool = pool
        self.running_key = running_key
        self.window = float(config.option("poison_pill_window", POISON_PILL_WINDOW))
        #: Held while a mark comes off, so that a job finished meanwhile is
        #: never unmarked after its id was claimed (and marked) again.
        self.lock = threading.Lock()
        self.timers: dict[UnitOfWork, threading.Timer] = {}

    def start(self, uow: UnitOfWork) -> None:
        """``uow``, a suspect, starts running now."""
        with self.lock:
            self._arm(uow, self.window)

    def stop(self, uow: UnitOfWork) -> None:
        """``uow`` finished or went back: its mark went with it."""
        with self.lock:
            timer = self.timers.pop(uow, None)
        if timer is not None:
            timer.cancel()

    def stop_all(self) -> None:
        with self.lock:
            timers, self.timers = list(self.timers.values()), {}
        for timer in timers:
            timer.cancel()

    def _arm(self, uow: UnitOfWork, delay: float) -> None:
        timer = threading.Timer(delay, self._outlived, (uow,))
        timer.name = "wurk-suspect-clock"
        timer.daemon = True
        self.timers[uow] = timer
        timer.start()

    def _outlived(self, uow: UnitOfWork) -> None:
        with self.lock:
            if uow not in self.timers:
                return  # finished or given back meanwhile
            try:
                self.pool.client.srem(self.running_key, uow.suspect)
            except Exception as exc:
                # Still marked: a crash would count, as in its first seconds.
                self.config.handle_exception(exc, {"context": "poison pill window"})
                self._arm(uow, RETRY_PAUSE)
                return
            del self.timers[uow]
        with self.ledger.lock:
            self.ledger.window_passed(uow)
