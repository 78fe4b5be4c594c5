"""Job execution metrics: recorded by every worker, readable by anyone.

* :class:`History` (alias :data:`Middleware`), a built-in server middleware,
  counts each job per class in memory; the heartbeat flushes the counts into
  Sidekiq 8's metrics keys, so both the Sidekiq Web UI and :class:`Query` see
  them.
* :class:`Statsd`, a built-in server middleware, sends ``jobs.*`` metrics to
  ``config.statsd`` once ``config.dogstatsd`` is set.
* :class:`MetricsRollup`, run by the launcher, keeps the leader's history
  stream and day totals (see :mod:`wurk.metrics.keys`).
"""

from wurk.metrics.query import GaugeSample, JobResult, Mark, Query, QueueGauge, Result
from wurk.metrics.rollup import MetricsRollup
from wurk.metrics.statsd import Statsd
from wurk.metrics.tracking import (
    BUCKET_BOUNDS,
    BUCKET_LABELS,
    ExecutionTracker,
    History,
    Middleware,
    flush_at_exit,
    flush_on_beat,
    tracker_for,
)

__all__ = [
    "BUCKET_BOUNDS",
    "BUCKET_LABELS",
    "ExecutionTracker",
    "GaugeSample",
    "History",
    "JobResult",
    "Mark",
    "MetricsRollup",
    "Middleware",
    "Query",
    "QueueGauge",
    "Result",
    "Statsd",
    "flush_at_exit",
    "flush_on_beat",
    "tracker_for",
]
