"""Reliable fetch: the only way Wurk takes a job off a queue.

Every fetch *moves* a job from the tail of its public queue onto this
process's private list for that queue (``queue:<q>|<host>|<pid>|<nonce>|0``),
atomically, and the job leaves the private list only when it is acknowledged
(``LREM``, or one ``DEL`` for a private list whose jobs are all acknowledged
at once) or given back. At every instant a job is in exactly one public
queue or one private list, so a process killed mid-job loses nothing: the
reaper of a live process moves its private lists back.

The states a claimed job goes through, and the ledger's books that track it
(:class:`~wurk.server.fetch.ledger.ClaimLedger`; the numbers are the ways back)::

        +-------------------------------------------------------------+
        |                                                             |
        v                                                             |
    QUEUED  in the public queue ``queue:<q>``                         |
        |                           |                                 |
        | core.fetch: a processor   | BLMOVE (+ core.adopt): a waiter |
        | thread, for itself, the   | or a lone queue's idle thread,  |
        | idle threads and ahead    | one job (a suspect that may     |
        |                           | not run alone now goes back) ---+ (1)
        v                           v                                 |
    +-- CLAIMED  in the private list; ``outstanding``, in ``held`` -+ |
    |   |                           |                               | |
    |   | the claim's first job,    | the others, and a waiter's    | |
    |   | and a thread's own        |                               | |
    |   |                           v                               | |
    |   |                   LOCAL  ``local``  --- unstarted -------------+ (2)
    |   |                           |                               | |
    |   |                           | next_local                    | |
    |   v                           v                               | |
    |   RUNNING  ``running``, a processor thread runs it  --------------+ (3) requeue
    |   |  a suspect: marked running here until its window ends     | |
    |   |  the lone suspect (``alone``): no other job starts and    | |
    |   |  no claim is made until it ends                           | |
    |   |  an async job (``lent``): on the event loop, its thread   | |
    |   |  claims again and the bound grows by one until its LREM   | |
    |   |                                                           | |
    |   +--- abandon ---> UNTRACKED (also what a lost reply  -----------+ (4) reconcile
    |   |                 claimed)                                  | |
    |   | acknowledge                                               | |
    |   v                                                           | |
    |   ACKED  ``acks``, the LREM not yet sent                      | |
    +---|-----------------------------------------------------------+ |
        | LREM, with the next core.fetch (or flush_acks)              |
        v                                 process died: the reaper  --+ (5)
      DONE

(1) ``core.fetch`` and ``core.adopt`` put back a suspect recovered twice
unless it may run alone; (2) at shutdown, jobs no thread started go back
with everything else in the private lists; (3) a processor quieted while its
fetch was blocked gives its job back at once; (4) a job neither done nor
booked, or whatever a claim whose reply was lost moved, is given back by a
reconcile before the next claim; (5) the private lists of a dead process go
back, each job becoming a suspect of its crash (:mod:`wurk.server.reaper`).

Which module owns which transition:

* :mod:`wurk.server.fetch.reliable`: :class:`ReliableFetcher`, the fetcher's public
  face. QUEUED to CLAIMED through ``core.fetch`` (the claim, with the
  acknowledgements it carries); LOCAL to RUNNING; RUNNING to ACKED to DONE;
  requeue (3) and the shutdown sweep (2).
* :mod:`wurk.server.fetch.ledger`: :class:`~wurk.server.fetch.ledger.ClaimLedger`, the
  books every part shares under one lock, changed only by its named
  operations: the bound on ``held``, the reservations of claims in flight,
  ``local``, ``running``, ``acks``, ``outstanding`` and the lone suspect.
  It never talks to Redis.
* :mod:`wurk.server.fetch.gate`: the lone suspect's rule across every fetcher of
  the process (:class:`~wurk.server.fetch.gate.SoloGate`).
* :mod:`wurk.server.fetch.waiters`: the blocking claims of one job while every
  queue is empty, unblocked by a quiet: with one queue, an idle thread's own
  ``BLMOVE`` (QUEUED to CLAIMED to RUNNING: it runs what it takes, with no
  hand-off); with several, a waiter's (QUEUED to CLAIMED to LOCAL).
* :mod:`wurk.server.fetch.reconcile`: UNTRACKED back to QUEUED (4), and the sweep
  of the private lists at shutdown.
* :mod:`wurk.server.fetch.suspects`: the marks of suspects, their clock, and the
  end of a lone run once its window has passed.
* :mod:`wurk.server.fetch.unit`: :class:`UnitOfWork` and the :class:`Fetcher`
  protocol a custom ``fetch_class`` implements.

The Lua these run sits with core's other scripts: ``lua/fetch.lua``,
``lua/adopt.lua``, ``lua/requeue.lua`` (and ``lua/reclaim.lua``, the
reaper's).
"""

from wurk.server.fetch.reliable import DEFAULT_POLL_INTERVAL, ReliableFetcher
from wurk.server.fetch.unit import Fetcher, UnitOfWork
from wurk.server.fetch.waiters import PAUSED_CACHE_SECONDS, WAITER_PAUSE

__all__ = [
    "DEFAULT_POLL_INTERVAL",
    "PAUSED_CACHE_SECONDS",
    "WAITER_PAUSE",
    "Fetcher",
    "ReliableFetcher",
    "UnitOfWork",
]
