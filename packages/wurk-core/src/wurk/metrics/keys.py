"""Every Redis key the metrics, history and deploy marks use, in one screen.

Sidekiq 8's keys (read by the Sidekiq Web UI, so their names, types and TTLs
are fixed, and every time in them is UTC):

====================================  ======  =========  ===================================
key                                   type    TTL        contents
====================================  ======  =========  ===================================
``j|<YYMMDD>|<H>:<MM>``               HASH    8 hours    one-minute bucket: ``<Class>|p``
                                                         (executions), ``<Class>|f``
                                                         (failures), ``<Class>|ms`` (total ms
                                                         of the successful ones)
``j|<YYMMDD>|<H>:<M>``                HASH    3 days     the same fields, ten-minute bucket
                                                         (the one-minute name minus its last
                                                         character: ``8:3`` is 08:30-08:39)
``h|<Class>-<d>-<H>:<M>``             STRING  8 hours    26 unsigned 16-bit big-endian
                                                         counters (a BITFIELD), one per
                                                         duration bucket; nothing padded
``<YYYYMMDD>-marks``                  HASH    90 days    deploy marks: ISO-8601 minute ->
                                                         label
``deploylock-<label>``                STRING  60 s       one mark per label and minute
====================================  ======  =========  ===================================

Wurk's own history keys, written only by the cluster leader's rollup (nothing
in Sidekiq reads or writes them):

====================================  ======  =========  ===================================
``wurk:history``                      STREAM  none       one entry per rollup tick (every
                                                         ``metrics_rollup_interval`` s):
                                                         cluster gauges and per-queue depth
                                                         and latency; trimmed with
                                                         ``MAXLEN ~ history_stream_cap``
``wurk:history:jobs:<YYYYMMDD>``      HASH    90 days    per-class day totals, the same
                                                         ``<Class>|p|f|ms`` fields, summed
                                                         from the one-minute hashes
``wurk:history:rolled``               STRING  none       epoch seconds of the last minute
                                                         summed into the day totals, so each
                                                         minute is counted once even when
                                                         the leadership changes hands
====================================  ======  =========  ===================================
"""

from __future__ import annotations

from datetime import date, datetime

ONE_MINUTE_TTL = 8 * 60 * 60
TEN_MINUTE_TTL = 3 * 24 * 60 * 60
HISTOGRAM_TTL = 8 * 60 * 60
MARKS_TTL = 90 * 24 * 60 * 60
DEPLOY_LOCK_TTL = 60
DAILY_TTL = 90 * 24 * 60 * 60

HISTORY_STREAM = "wurk:history"
ROLLUP_CURSOR = "wurk:history:rolled"


def one_minute(at: datetime) -> str:
    """``j|261130|8:35``: hour unpadded, minute two digits (``at`` in UTC)."""
    return f"j|{at:%y%m%d}|{at.hour}:{at.minute:02d}"


def ten_minutes(at: datetime) -> str:
    """``j|261130|8:3``: the one-minute name without its last character."""
    return one_minute(at)[:-1]


def histogram(klass: str, at: datetime) -> str:
    """``h|OkJob-30-8:5``: day of the month, hour and minute, none padded."""
    return f"h|{klass}-{at.day}-{at.hour}:{at.minute}"


def deploy_marks(day: date) -> str:
    """``20261130-marks``: the deploy marks of one UTC day."""
    return f"{day:%Y%m%d}-marks"


def deploy_lock(label: str) -> str:
    return f"deploylock-{label}"


def daily_jobs(day: date) -> str:
    """``wurk:history:jobs:20261130``: per-class totals of one UTC day."""
    return f"wurk:history:jobs:{day:%Y%m%d}"
