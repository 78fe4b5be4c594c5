"""The chaos driver's short form (``python bench/chaos --short``), as CI runs it.

Real worker processes on a private Valkey with AOF, faults injected for real
(SIGKILLed workers, a broker restart, connections cut, replies lost after the
server applied the command, jobs that ``os._exit``), judged from a separate
ledger server that no fault touches. Each fault must have struck, no accepted
job may be lost, every duplicate must be explained by a fault that hit the
job while it was in flight, and a job that crashes its process every time
must end in the dead set.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.helpers import ROOT

pytestmark = [pytest.mark.slow, pytest.mark.timeout(400)]


def test_the_short_chaos_run_loses_nothing_and_explains_every_duplicate(tmp_path):
    output = tmp_path / "chaos.json"
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "chaos"), "--short", "--output", str(output)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=380,
        check=False,
    )
    assert output.exists(), done.stdout + done.stderr
    results = {result["fault"]: result for result in json.loads(output.read_text())["results"]}
    assert set(results) == {"kill", "redis-restart", "cut", "lost-reply", "exit"}, done.stdout
    for fault, result in results.items():
        assert result["faults_injected"].get(fault), (fault, result["faults_injected"])
        assert result["accepted"] + result["refused"] == result["planned"], fault
        assert result["lost_keys"] == [], (fault, result["lost_keys"], result["where"])
        assert result["duplicates"] == result["duplicates_explained"], (fault, result["duplicates_unexplained"])
        assert result["duplicates"] <= result["in_flight_bound"], fault
    assert results["kill"]["faults_injected"]["kill"] == 4
    assert sum(results["lost-reply"]["lost_replies"].values()) >= 1
    poison = results["exit"]["poison_runs"]
    assert poison, "the exit scenario pushed no poison pill"
    for key, runs in poison.items():
        assert results["exit"]["where"][key] == "dead", (key, runs, results["exit"]["where"])
    assert done.returncode == 0, done.stdout + done.stderr
