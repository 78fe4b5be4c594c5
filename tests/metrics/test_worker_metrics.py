"""Metrics written by a real worker, compared with what Sidekiq 8.1.7 wrote."""

from __future__ import annotations

import json
import re
import signal
import time

from tests.helpers import ROOT, wait_for, wait_for_beats
from tests.metrics.metrics_app import FailJob, OkJob, SlowJob
from wurk.metrics import Query

FIXTURES = ROOT / "tests" / "fixtures" / "sidekiq-8.1.7"
ONE_MINUTE = re.compile(r"^j\|\d{6}\|\d{1,2}:\d{2}$")
TEN_MINUTES = re.compile(r"^j\|\d{6}\|\d{1,2}:\d$")
HISTOGRAM = re.compile(r"^h\|(?P<klass>.+)-(?P<day>\d{1,2})-(?P<hour>\d{1,2}):(?P<minute>\d{1,2})$")
OK, FAIL, SLOW = (f"tests.metrics.metrics_app.{name}" for name in ("OkJob", "FailJob", "SlowJob"))


def captured(name: str) -> dict:
    return json.loads((FIXTURES / name).read_text(encoding="utf-8"))["keys"]


def metric_keys(redis, prefix: str) -> dict[str, bytes]:
    return {key.decode(): redis.type(key) for key in redis.scan_iter(f"{prefix}|*")}


def summed(redis, pattern: re.Pattern[str]) -> dict[str, int]:
    totals: dict[str, int] = {}
    for key in metric_keys(redis, "j"):
        if pattern.match(key):
            for field, value in redis.hgetall(key).items():
                totals[field.decode()] = totals.get(field.decode(), 0) + int(value)
    return totals


def run_jobs(workers, redis):
    for n in range(3):
        OkJob.perform_async(n)
    FailJob.perform_async(1)
    FailJob.perform_async(2)
    SlowJob.perform_async(0.3)
    worker = workers.start("-c", "3")
    wait_for(lambda: summed(redis, ONE_MINUTE).get(f"{SLOW}|p") == 1, timeout=30)
    wait_for(lambda: summed(redis, ONE_MINUTE).get(f"{OK}|p") == 3, timeout=10)
    wait_for(lambda: summed(redis, ONE_MINUTE).get(f"{FAIL}|p") == 2, timeout=10)
    return worker


def test_a_workers_metrics_have_sidekiqs_keys_fields_ttls_and_layout(workers, redis):
    worker = run_jobs(workers, redis)
    worker.signal(signal.SIGTERM)
    assert worker.wait(30) == 0
    sidekiq_j, sidekiq_h = captured("metrics-j-hashes.json"), captured("metrics-h-histograms.json")

    # Key names and types: the same shapes as Sidekiq's.
    assert all(ONE_MINUTE.match(key) or TEN_MINUTES.match(key) for key in sidekiq_j)
    assert all(HISTOGRAM.match(key) for key in sidekiq_h)
    ours_j, ours_h = metric_keys(redis, "j"), metric_keys(redis, "h")
    assert ours_j
    assert all(ONE_MINUTE.match(key) or TEN_MINUTES.match(key) for key in ours_j)
    assert {kind.decode() for kind in ours_j.values()} == {entry["type"] for entry in sidekiq_j.values()} == {"hash"}
    assert {kind.decode() for kind in ours_h.values()} == {entry["type"] for entry in sidekiq_h.values()} == {"string"}
    for key in ours_j:  # every one-minute bucket has its ten-minute rollup
        assert not ONE_MINUTE.match(key) or key[:-1] in ours_j

    # TTLs: 8 hours for the one-minute hashes and histograms, 3 days for the ten-minute hashes.
    for key in ours_j:
        nominal = 28_800 if ONE_MINUTE.match(key) else 259_200
        fixture_ttls = [e["ttl_s"] for k, e in sidekiq_j.items() if bool(ONE_MINUTE.match(k)) == (nominal == 28_800)]
        assert all(nominal - 300 < ttl <= nominal for ttl in fixture_ttls)
        assert nominal - 60 < redis.ttl(key) <= nominal
    assert all(28_800 - 300 < entry["ttl_s"] <= 28_800 for entry in sidekiq_h.values())
    assert all(28_800 - 60 < redis.ttl(key) <= 28_800 for key in ours_h)

    # Fields: <Class>|p always, |ms for successes, |f for failures; as for Sidekiq's OkJob and NoRetryJob.
    sidekiq_fields = sidekiq_j["j|261130|8:35"]["value"]
    assert {f.split("|")[1] for f in sidekiq_fields if f.startswith("OkJob|")} == {"p", "ms"}
    assert {f.split("|")[1] for f in sidekiq_fields if f.startswith("NoRetryJob|")} == {"p", "f"}
    one_minute, ten_minutes = summed(redis, ONE_MINUTE), summed(redis, TEN_MINUTES)
    assert one_minute == ten_minutes
    assert {field for field in one_minute if field.startswith(OK + "|")} == {f"{OK}|p", f"{OK}|ms"}
    assert {field for field in one_minute if field.startswith(FAIL + "|")} == {f"{FAIL}|p", f"{FAIL}|f"}
    assert (one_minute[f"{OK}|p"], one_minute[f"{FAIL}|p"], one_minute[f"{FAIL}|f"]) == (3, 2, 2)
    assert one_minute[f"{OK}|ms"] < 100
    assert 300 <= one_minute[f"{SLOW}|ms"] < 2_000

    # Histograms: 26 big-endian u16 counters, only as long as the highest bucket written.
    by_class: dict[str, list[int]] = {}
    for key in ours_h:
        raw = redis.get(key)
        counters = [int.from_bytes(raw[i : i + 2], "big") for i in range(0, len(raw), 2)]
        counters += [0] * (26 - len(counters))
        klass = HISTOGRAM.match(key)["klass"]
        by_class[klass] = [a + b for a, b in zip(by_class.get(klass, [0] * 26), counters, strict=True)]
        assert len(raw) % 2 == 0
        assert len(raw) == 2 * (max(i for i, count in enumerate(counters) if count) + 1)
    sidekiq_ok = bytes.fromhex(sidekiq_h["h|OkJob-30-8:35"]["value"]["binary_hex"])
    assert len(sidekiq_ok) == 2  # one fast job: only bucket 0 written
    assert FAIL not in by_class  # failures are not timed, as in Sidekiq (no h|FailJob, h|NoRetryJob)
    assert sum(by_class[OK]) == 3
    assert sum(by_class[SLOW]) == 1
    assert 7 <= by_class[SLOW].index(1) <= 10  # 300 ms and a little more: the 335 ms bucket or next


def test_query_reads_back_what_the_worker_wrote(workers, redis):
    worker = run_jobs(workers, redis)
    result = Query().top_jobs(minutes=10)
    assert result.granularity == "minutely"
    assert {OK, FAIL, SLOW} <= set(result.job_results)
    ok, fail = result.job_results[OK], result.job_results[FAIL]
    assert (ok.totals["p"], ok.totals["f"]) == (3, 0)
    assert (fail.totals["p"], fail.totals["f"]) == (2, 2)
    assert fail.total_avg() == 0.0
    assert set(Query().top_jobs(minutes=10, class_filter=r"\.Slow").job_results) == {SLOW}
    slow = Query().for_job(SLOW, minutes=10).job_results[SLOW]
    assert slow.totals["p"] == 1
    assert slow.total_avg("ms") >= 300
    assert sum(sum(histogram) for histogram in slow.hist.values()) == 1
    assert len(slow.hist) == 10
    hours = Query().top_jobs(hours=1)
    assert hours.granularity == "hourly"
    assert hours.job_results[OK].totals["p"] == 3
    worker.signal(signal.SIGTERM)
    assert worker.wait(30) == 0


def test_only_the_leader_writes_history_samples(workers, redis):
    follower = workers.start("-c", "1", env={"WURK_LEADER": "false"})
    wait_for(lambda: redis.scard("processes") == 1, timeout=30)
    # Five beats of the follower's heartbeat, whose interval is the rollup's:
    # five rollup intervals as the follower lived them, however loaded the machine.
    wait_for_beats(redis, redis.smembers("processes").pop(), 5)
    assert redis.exists("wurk:history") == 0
    leader = workers.start("-c", "1")
    wait_for(lambda: redis.xlen("wurk:history") >= 2, timeout=30)
    [sample] = Query().gauges(count=1)
    assert sample.processes == 2
    assert abs(sample.at.timestamp() - time.time()) < 10
    for worker in (leader, follower):
        worker.signal(signal.SIGTERM)
        assert worker.wait(30) == 0
