"""The limits hold across real processes sharing one server, and no decision
depends on the client's clock."""

from __future__ import annotations

import json
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.helpers import ROOT, Subprocess

LOAD = "tests.limiter.load"


def run_load(redis_url: str, scenario: str, threads: int, rounds: int, processes: int = 2) -> None:
    children = [
        Subprocess.python("-m", LOAD, scenario, str(threads), str(rounds), env={"REDIS_URL": redis_url}, cwd=ROOT)
        for _ in range(processes)
    ]
    for child in children:
        try:
            code = child.wait(120)
            out = child.output()  # also closes the pipe
        finally:
            child.stop()
        assert code == 0, out


def admitted(redis) -> list[float]:
    return sorted(float(at) for at in redis.lrange("admitted", 0, -1))


def test_concurrent_never_has_more_holders_than_its_limit(redis_url, redis):
    run_load(redis_url, "concurrent", threads=10, rounds=6)
    samples = [int(value) for value in redis.lrange("holders", 0, -1)]
    holders, slots = samples[0::2], samples[1::2]
    assert max(holders) == 3  # contended, and never over
    assert max(slots) == 3
    assert redis.llen("done") == 2 * 10 * 6  # all the work completed
    assert redis.zcard("lmtr-cs:x") == 0


def test_window_admits_exactly_its_count_in_the_window(redis_url, redis):
    seconds, micros = redis.time()
    start = seconds + micros / 1e6
    run_load(redis_url, "window", threads=5, rounds=8)
    seconds, micros = redis.time()
    span = seconds + micros / 1e6 - start
    assert span < 10, "the burst must fit in one window for the count to be exact"
    assert len(admitted(redis)) == 5
    assert redis.llen("refused") == 2 * 5 * 8 - 5


def test_bucket_resets_at_each_boundary_across_processes(redis_url, redis):
    run_load(redis_url, "bucket", threads=5, rounds=4)  # 40 calls at 10 a second
    times = admitted(redis)
    assert len(times) == 40
    per_second = Counter(int(at) for at in times)
    assert max(per_second.values()) <= 10
    assert len(per_second) >= 4
    for epoch, count in per_second.items():
        assert int(redis.get(f"lmtr-b:b:{epoch}")) == count


def test_leaky_drains_at_its_rate_across_processes(redis_url, redis):
    run_load(redis_url, "leaky", threads=3, rounds=2)  # 12 drops, burst 4, 4 a second
    times = admitted(redis)
    assert len(times) == 12
    for index, at in enumerate(times[4:], start=4):
        assert at - times[0] >= (index - 3) / 4 - 0.001, times


def test_points_refunds_across_processes(redis_url, redis):
    # Ten calls estimated at 20 from a balance of 100 that never refills: only
    # the refunds (each call used 5) leave room for all of them.
    run_load(redis_url, "points", threads=1, rounds=5)
    assert len(admitted(redis)) == 10
    balance = float(redis.hget("lmtr-p:p", "points"))
    assert balance == pytest.approx(50, abs=1e-6)


SITECUSTOMIZE = """
import time

_real_time, _real_ns = time.time, time.time_ns
SKEW = {skew}
time.time = lambda: _real_time() + SKEW
time.time_ns = lambda: _real_ns() + int(SKEW * 1e9)
"""


def skewed(redis_url: str, tmp_path: Path, phase: str, skew: float) -> dict:
    folder = tmp_path / f"skew{int(skew)}"
    folder.mkdir(exist_ok=True)
    (folder / "sitecustomize.py").write_text(SITECUSTOMIZE.format(skew=skew))
    env = {"REDIS_URL": redis_url, "PYTHONPATH": f"{folder}:{ROOT}"}
    child = Subprocess([sys.executable, "-m", LOAD, "skew", phase], env=env, cwd=ROOT)
    try:
        code = child.wait(60)
        out = child.output()
    finally:
        child.stop()
    assert code == 0, out
    report = json.loads(out.strip().splitlines()[-1])
    assert abs(report["clock"] - time.time() - skew) < 60, "the child's clock must really be shifted"
    return dict(report["admitted"])


def server_hour(redis) -> int:
    return int(redis.time()[0]) // 3600


def test_client_clock_skew_changes_no_admission(redis_url, redis, tmp_path):
    # Three processes an hour behind, an hour ahead and on time share the
    # same limiters. Had any decision used the client clock, the one ahead
    # would see the first one's entries, slots and levels as two hours old.
    for _attempt in range(2):  # once more if the bucket's hour rolled over mid-test
        redis.flushdb()
        hour = server_hour(redis)
        first = skewed(redis_url, tmp_path, "first", -3600)
        second = skewed(redis_url, tmp_path, "second", +3600)
        third = skewed(redis_url, tmp_path, "third", 0)
        if server_hour(redis) == hour:
            break
    kinds = ("concurrent", "bucket", "window", "leaky", "points")
    assert first == {kind: [True, True] for kind in kinds}
    assert second == {"concurrent": [False] * 3, **{kind: [True, False, False] for kind in kinds[1:]}}
    assert third == {kind: [False] for kind in kinds}
