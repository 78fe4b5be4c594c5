"""Query over metrics Ruby Sidekiq 8.1.7 wrote, restored byte for byte."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from tests.helpers import ROOT
from wurk.api.deploy import Deploy
from wurk.metrics import BUCKET_LABELS, Query

FIXTURES = ROOT / "tests" / "fixtures" / "sidekiq-8.1.7"
NOW = datetime(2026, 11, 30, 8, 37, 10, tzinfo=UTC)


@pytest.fixture
def sidekiq_metrics(config, redis):
    """The capture's ``j|`` hashes and ``h|`` bitfields, as Sidekiq left them."""
    hashes = json.loads((FIXTURES / "metrics-j-hashes.json").read_text(encoding="utf-8"))["keys"]
    for key, entry in hashes.items():
        redis.hset(key, mapping=entry["value"])
    grams = json.loads((FIXTURES / "metrics-h-histograms.json").read_text(encoding="utf-8"))["keys"]
    for key, entry in grams.items():
        redis.set(key, bytes.fromhex(entry["value"]["binary_hex"]))
    return hashes, grams


def test_top_jobs_over_minutes(sidekiq_metrics):
    result = Query(now=NOW).top_jobs(minutes=5)
    assert result.granularity == "minutely"
    assert result.ends_at == NOW
    assert result.starts_at == datetime(2026, 11, 30, 8, 32, 10, tzinfo=UTC)
    jobs = result.job_results
    assert set(jobs) == {
        "CriticalJob",
        "FailJob",
        "OkJob",
        "NoRetryJob",
        "DeadNowJob",
        "TaggedJob",
        "IterJob",
        "SlowJob",
    }
    assert dict(jobs["FailJob"].totals) == {"p": 3, "f": 3}
    assert jobs["FailJob"].series["p"] == {"2026-11-30T08:36:00Z": 2, "2026-11-30T08:35:00Z": 1}
    assert jobs["SlowJob"].totals["ms"] == 30_000
    assert jobs["SlowJob"].totals["s"] == 30.0
    assert jobs["SlowJob"].total_avg("ms") == 30_000.0
    assert jobs["SlowJob"].series_avg("ms") == {"2026-11-30T08:36:00Z": 30_000.0}
    assert jobs["FailJob"].total_avg() == 0.0


def test_top_jobs_over_hours_reads_the_ten_minute_hashes(sidekiq_metrics):
    hashes, _ = sidekiq_metrics
    result = Query(now=NOW).top_jobs(hours=1)
    assert result.granularity == "hourly"
    assert result.job_results["FailJob"].series["p"] == {"2026-11-30T08:30:00Z": 3}
    expected = {field: int(value) for field, value in hashes["j|261130|8:3"]["value"].items()}
    got = {
        f"{klass}|{metric}": total for klass, job in result.job_results.items() for metric, total in job.totals.items()
    }
    assert {name: value for name, value in got.items() if not name.endswith("|s")} == expected


def test_class_filter_is_a_regular_expression(sidekiq_metrics):
    result = Query(now=NOW).top_jobs(minutes=5, class_filter="^(Ok|Slow)Job$")
    assert set(result.job_results) == {"OkJob", "SlowJob"}


def test_for_job_returns_its_series_and_histograms(sidekiq_metrics):
    job = Query(now=NOW).for_job("SlowJob", minutes=3).job_results["SlowJob"]
    assert dict(job.totals) == {"ms": 30_000, "s": 30.0, "p": 1}
    assert set(job.hist) == {"2026-11-30T08:37:00Z", "2026-11-30T08:36:00Z", "2026-11-30T08:35:00Z"}
    slow = job.hist["2026-11-30T08:36:00Z"]
    assert len(slow) == len(BUCKET_LABELS) == 26
    assert slow.index(1) == 19
    assert BUCKET_LABELS[19] == "45s"  # 30,000 ms is not under 30 s: the bucket up to 45 s
    assert sum(job.hist["2026-11-30T08:35:00Z"]) == 0
    hourly = Query(now=NOW).for_job("SlowJob", hours=1).job_results["SlowJob"]
    assert hourly.hist == {}  # histograms exist per minute only


def test_windows_are_clamped(config):
    assert len(Query(now=NOW).for_job("X", minutes=10_000).job_results["X"].hist) == 480
    result = Query(now=NOW).top_jobs(hours=1_000)
    assert (result.ends_at - result.starts_at).total_seconds() == 72 * 3600


def test_deploy_marks_in_the_window_come_with_the_results(sidekiq_metrics):
    Deploy.mark("v1", at=datetime(2026, 11, 30, 8, 35, 20, tzinfo=UTC))
    Deploy.mark("too old", at=datetime(2026, 11, 30, 7, 0, tzinfo=UTC))
    [mark] = Query(now=NOW).top_jobs(minutes=10).marks
    assert (mark.label, mark.bucket) == ("v1", "2026-11-30T08:35:00Z")
    assert mark.time == datetime(2026, 11, 30, 8, 35, tzinfo=UTC)
    [hourly] = Query(now=NOW).top_jobs(hours=1).marks
    assert hourly.bucket == "2026-11-30T08:30:00Z"
