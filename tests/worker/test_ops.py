"""The ops commands (``wurk stats``, ``wurk job retry`` …) against a real server."""

from __future__ import annotations

import json
import signal
import time

from click.testing import CliRunner

import wurk
from tests.helpers import wait_for
from tests.worker.worker_app import Record, Slow
from wurk.cli import build


def run(config, *args):
    result = CliRunner().invoke(build(config), list(args), obj={"config": config}, catch_exceptions=False)
    return result


def test_stats_and_queues(config, redis):
    Record.perform_bulk([[n] for n in range(3)])
    Record.set(queue="low").perform_async("x")
    Record.perform_in(60, "later")
    redis.set("stat:processed", 7)
    data = json.loads(run(config, "stats", "--json").output)
    assert (data["processed"], data["enqueued"], data["scheduled"], data["retries"]) == (7, 4, 1, 0)
    queues = json.loads(run(config, "queues", "--json").output)
    assert [(q["name"], q["size"]) for q in queues] == [("default", 3), ("low", 1)]
    human = run(config, "queues").output
    assert human.splitlines()[0].split() == ["QUEUE", "SIZE", "LATENCY", "STATE"]
    run(config, "pause", "low")
    assert redis.sismember("paused", "low")
    assert "paused" in run(config, "queues").output
    run(config, "unpause", "low")
    assert not redis.sismember("paused", "low")


def test_one_job_by_jid(config, redis):
    jid = Record.perform_async("find me")
    shown = json.loads(run(config, "job", "show", jid, "--json").output)
    assert (shown["where"], shown["jid"], shown["args"]) == ("queue:default", jid, ["find me"])
    assert run(config, "job", "kill", jid).exit_code == 0
    assert redis.llen("queue:default") == 0
    assert json.loads(redis.zrange("dead", 0, -1)[0])["jid"] == jid
    assert run(config, "job", "retry", jid).exit_code == 0
    assert json.loads(redis.lindex("queue:default", 0))["jid"] == jid
    assert redis.zcard("dead") == 0
    assert run(config, "job", "delete", jid).exit_code == 0
    assert redis.llen("queue:default") == 0
    missing = CliRunner().invoke(build(config), ["job", "show", jid], obj={"config": config})
    assert missing.exit_code == 1
    assert f"no job {jid}" in missing.output


def test_whole_sets(config, redis):
    for n in range(3):
        wurk.api.RetrySet().schedule(time.time() + 60, {"class": "X", "args": [n], "jid": f"{n:024d}", "queue": "q"})
    assert "3 job(s) moved from retry to the dead set" in run(config, "kill-all", "retry").output
    assert redis.zcard("dead") == 3
    assert "3 job(s) moved from dead to their queues" in run(config, "retry-all", "dead").output
    assert redis.llen("queue:q") == 3


def test_processes_quiet_and_stop(workers, config, redis):
    worker = workers.start("-c", "2", "-g", "opsy")
    wait_for(lambda: redis.scard("processes") == 1, timeout=30)
    [process] = json.loads(run(config, "processes", "--json").output)
    assert (process["tag"], process["concurrency"], process["quiet"]) == ("opsy", 2, False)
    assert "opsy" in run(config, "top", "--once").output
    run(config, "quiet", process["identity"])
    wait_for(lambda: json.loads(run(config, "processes", "--json").output)[0]["quiet"], timeout=10)
    Slow.perform_async("never", 0)
    time.sleep(1)
    assert redis.llen("queue:default") == 1  # quiet: nothing fetched
    run(config, "stop", "--all")
    assert worker.wait(30) == 0
    assert worker.proc.returncode != -signal.SIGKILL
    bad = CliRunner().invoke(build(config), ["quiet"], obj={"config": config})
    assert bad.exit_code == 2
