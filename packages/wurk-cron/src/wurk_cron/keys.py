"""Every Redis key wurk-cron reads or writes, in one screen.

The names and shapes are Sidekiq Enterprise's periodic-job registry, so a
Ruby process and a Python process sharing one Redis see the same loops.
"""

from __future__ import annotations

PERIODIC = "periodic"  # SET of every registered loop id (lid)

#: Fields of a loop's HASH: the registration, then the poller's marks.
SCHEDULE = "schedule"  # the cron string as registered
KLASS = "klass"  # the job's wire class name
OPTIONS = "options"  # JSON object: queue, retry, args and any other option
TZ = "tz"  # the zone's name, empty for UTC
PAUSED = "paused"  # "1" paused, "0" running; written with HSETNX
LAST_FIRE = "lf"  # epoch seconds of the last fire
NEXT_FIRE = "nf"  # epoch seconds of the next due fire

#: Fires kept in a loop's history.
HISTORY_SIZE = 25


def loop(lid: str) -> str:
    """The HASH describing one loop (fields above)."""
    return f"loops:{lid}"


def history(lid: str) -> str:
    """The LIST of a loop's fires, newest first: JSON ``[fired_at, jid]``."""
    return f"loop-history:{lid}"
