"""Reading the execution metrics back: per-class series, histograms, history.

:class:`Query` reads what any process wrote, Ruby or Python, so its numbers
are the ones the Sidekiq Web UI's Metrics pages show. All times are UTC::

    query = wurk.metrics.Query()
    result = query.top_jobs(minutes=60)
    for klass, job in result.job_results.items():
        print(klass, job.totals["p"], job.totals["f"], job.total_avg("ms"))

``minutes`` reads the one-minute hashes (at most 480: they live 8 hours);
``hours`` reads the ten-minute hashes (at most 72: they live 3 days). Series
are keyed by the ISO-8601 start of each bucket, newest first, and every
``ms`` value is mirrored in seconds under ``s``.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from wurk.api._base import RedisAccess, as_int, text
from wurk.metrics import keys
from wurk.metrics.tracking import BUCKETS

if TYPE_CHECKING:
    from wurk.config.configuration import Config
    from wurk.redis.connection import RedisPool

#: The counters every history sample carries, besides ``queues``.
GAUGE_FIELDS = ("processed", "failed", "enqueued", "busy", "retry", "scheduled", "dead", "processes")
MAX_MINUTES = 480
MAX_HOURS = 72
_HISTOGRAM_FETCH = [part for index in range(BUCKETS) for part in ("GET", "u16", f"#{index}")]


def bucket_label(at: datetime, stride: int) -> str:
    """The ISO-8601 start of the bucket ``at`` falls in (``2026-11-30T08:30:00Z``)."""
    epoch = int(at.timestamp())
    start = datetime.fromtimestamp(epoch - epoch % stride, UTC)
    return start.strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class JobResult:
    """One class's metrics over the queried window."""

    series: dict[str, dict[str, float]] = field(default_factory=lambda: defaultdict(lambda: defaultdict(int)))
    hist: dict[str, list[int]] = field(default_factory=dict)
    totals: dict[str, float] = field(default_factory=lambda: defaultdict(int))

    def add_metric(self, metric: str, bucket: str, value: float) -> None:
        self.totals[metric] += value
        self.series[metric][bucket] += value
        if metric == "ms":
            self.add_metric("s", bucket, value / 1000.0)

    def total_avg(self, metric: str = "ms") -> float:
        """``metric`` per successful execution over the whole window (0 when none)."""
        completed = self.totals["p"] - self.totals["f"]
        return self.totals[metric] / completed if completed else 0.0

    def series_avg(self, metric: str = "ms") -> dict[str, float]:
        """``metric`` per successful execution, bucket by bucket."""
        averages = {}
        for bucket, value in self.series[metric].items():
            completed = self.series["p"].get(bucket, 0) - self.series["f"].get(bucket, 0)
            averages[bucket] = value / completed if completed else 0.0
        return averages


@dataclass(frozen=True)
class Mark:
    """A deploy mark inside the window, with the bucket it is drawn in."""

    time: datetime
    label: str
    bucket: str


@dataclass
class Result:
    """What a query found: per-class results and the deploy marks of the window
    ``starts_at`` .. ``ends_at``. ``granularity`` is ``"minutely"`` (one-minute
    buckets) or ``"hourly"`` (ten-minute buckets)."""

    granularity: str
    starts_at: datetime
    ends_at: datetime
    job_results: dict[str, JobResult] = field(default_factory=lambda: defaultdict(JobResult))
    marks: list[Mark] = field(default_factory=list)


@dataclass(frozen=True)
class QueueGauge:
    """A queue's depth, and how long its oldest job had waited (seconds)."""

    size: int
    latency: float


@dataclass(frozen=True)
class GaugeSample:
    """One entry of the leader's history stream."""

    at: datetime
    processed: int
    failed: int
    enqueued: int
    busy: int
    retry: int
    scheduled: int
    dead: int
    processes: int
    queues: dict[str, QueueGauge]


def _window(minutes: int | None, hours: int | None) -> tuple[str, int, int]:
    """(granularity, bucket stride in seconds, bucket count), clamped against abuse."""
    if hours:
        return "hourly", 600, max(1, min(int(hours), MAX_HOURS)) * 6
    return "minutely", 60, max(1, min(int(minutes or 60), MAX_MINUTES))


def _key(at: datetime, granularity: str) -> str:
    return keys.ten_minutes(at) if granularity == "hourly" else keys.one_minute(at)


def _matcher(class_filter: str | re.Pattern[str] | None) -> Any:
    if class_filter is None:
        return lambda klass: True
    pattern = re.compile(class_filter) if isinstance(class_filter, str) else class_filter
    return lambda klass: pattern.search(klass) is not None


class Query(RedisAccess):
    """Execution metrics as of ``now`` (default: the moment of construction)."""

    def __init__(
        self, config: Config | None = None, *, pool: RedisPool | str | None = None, now: datetime | None = None
    ) -> None:
        super().__init__(config, pool)
        self.now = (now or datetime.now(UTC)).astimezone(UTC)

    def _times(self, stride: int, count: int) -> list[datetime]:
        return [self.now - timedelta(seconds=stride * index) for index in range(count)]

    def top_jobs(
        self,
        *,
        minutes: int | None = None,
        hours: int | None = None,
        class_filter: str | re.Pattern[str] | None = None,
    ) -> Result:
        """Every class's ``p`` / ``f`` / ``ms`` series over the last ``minutes`` (or ``hours``).

        ``class_filter`` (a regular expression, searched) keeps only matching classes.
        """
        granularity, stride, count = _window(minutes, hours)
        times = self._times(stride, count)

        def read(conn: Any) -> list[Any]:
            pipe = conn.pipeline(transaction=False)
            for at in times:
                pipe.hgetall(_key(at, granularity))
            replies: list[Any] = pipe.execute()
            return replies

        wanted = _matcher(class_filter)
        result = Result(granularity, times[-1] - timedelta(seconds=stride), self.now)
        for at, fields in zip(times, self.run(read), strict=True):
            bucket = bucket_label(at, stride)
            for name, value in fields.items():
                klass, _, metric = text(name).rpartition("|")
                if klass and wanted(klass):
                    result.job_results[klass].add_metric(metric, bucket, as_int(value))
        result.marks = self._marks(result, stride)
        return result

    def for_job(self, klass: str, *, minutes: int | None = None, hours: int | None = None) -> Result:
        """One class's series, plus its duration histogram per minute (with ``minutes`` only).

        Each histogram is the 26 bucket counts in :data:`~wurk.metrics.BUCKET_LABELS`
        order, fastest first.
        """
        granularity, stride, count = _window(minutes, hours)
        times = self._times(stride, count)
        with_histograms = granularity == "minutely"

        def read(conn: Any) -> list[Any]:
            pipe = conn.pipeline(transaction=False)
            for at in times:
                pipe.hmget(_key(at, granularity), f"{klass}|ms", f"{klass}|p", f"{klass}|f")
                if with_histograms:
                    pipe.execute_command("BITFIELD_RO", keys.histogram(klass, at), *_HISTOGRAM_FETCH)
            replies: list[Any] = pipe.execute()
            return replies

        replies = self.run(read)
        step = 2 if with_histograms else 1
        result = Result(granularity, times[-1] - timedelta(seconds=stride), self.now)
        job = result.job_results[klass]
        for index, at in enumerate(times):
            bucket = bucket_label(at, stride)
            for metric, value in zip(("ms", "p", "f"), replies[index * step], strict=True):
                if value is not None:
                    job.add_metric(metric, bucket, as_int(value))
            if with_histograms:
                job.hist[bucket] = [as_int(counter) for counter in replies[index * step + 1]]
        result.marks = self._marks(result, stride)
        return result

    def _marks(self, result: Result, stride: int) -> list[Mark]:
        start, end = result.starts_at, result.ends_at
        days = [start.date() + timedelta(days=offset) for offset in range((end.date() - start.date()).days + 1)]

        def read(conn: Any) -> list[Any]:
            pipe = conn.pipeline(transaction=False)
            for day in days:
                pipe.hgetall(keys.deploy_marks(day))
            replies: list[Any] = pipe.execute()
            return replies

        marks = []
        for fields in self.run(read):
            for stamp, label in fields.items():
                try:
                    when = datetime.fromisoformat(text(stamp)).astimezone(UTC)
                except ValueError:
                    continue  # not a mark Wurk or Sidekiq wrote
                if start <= when <= end:
                    marks.append(Mark(when, text(label), bucket_label(when, stride)))
        return sorted(marks, key=lambda mark: mark.time)

    def daily(self, days: int = 30) -> dict[str, dict[str, dict[str, int]]]:
        """Per-class day totals kept by the leader's rollup, newest day first:
        ``{"2026-11-30": {"app.jobs.Report": {"p": 12, "f": 1, "ms": 5400}}}``."""
        today = self.now.date()
        wanted = [today - timedelta(days=offset) for offset in range(max(1, min(int(days), 90)))]

        def read(conn: Any) -> list[Any]:
            pipe = conn.pipeline(transaction=False)
            for day in wanted:
                pipe.hgetall(keys.daily_jobs(day))
            replies: list[Any] = pipe.execute()
            return replies

        totals: dict[str, dict[str, dict[str, int]]] = {}
        for day, fields in zip(wanted, self.run(read), strict=True):
            per_class: dict[str, dict[str, int]] = defaultdict(dict)
            for name, value in fields.items():
                klass, _, metric = text(name).rpartition("|")
                per_class[klass][metric] = as_int(value)
            totals[day.isoformat()] = dict(per_class)
        return totals

    def gauges(self, count: int = 60) -> list[GaugeSample]:
        """The latest ``count`` samples of the leader's history stream, oldest first."""
        entries = self.run(lambda conn: conn.xrevrange(keys.HISTORY_STREAM, count=count)) or []
        # XREVRANGE never answers an entry without fields; redis-py's reply type
        # allows one (it is shared with XCLAIM, which can), so it is skipped.
        return [parse_sample(entry_id, fields) for entry_id, fields in reversed(entries) if fields is not None]


def parse_sample(entry_id: Any, fields: dict[Any, Any]) -> GaugeSample:
    values = {text(name): text(value) for name, value in fields.items()}
    millis = int(text(entry_id).split("-")[0])
    queues = {
        name: QueueGauge(int(size), float(latency)) for name, (size, latency) in json.loads(values["queues"]).items()
    }
    return GaugeSample(
        at=datetime.fromtimestamp(millis / 1000, UTC),
        queues=queues,
        **{name: as_int(values.get(name)) for name in GAUGE_FIELDS},
    )
