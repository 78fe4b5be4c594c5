"""The ops commands (``wurk stats``, ``wurk job retry`` …) against a real server."""

from __future__ import annotations

import json
import signal
import time

from click.testing import CliRunner

import wurk
import wurk.api
from tests.helpers import wait_for, wait_until_fetching_ended
from tests.worker.worker_app import Record, Slow
from wurk.cli.main import build


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
    assert "3 jobs moved from retry to the dead set" in run(config, "kill-all", "retry", "--yes").output
    assert redis.zcard("dead") == 3
    assert "3 jobs moved from dead to their queues" in run(config, "retry-all", "dead").output
    assert redis.llen("queue:q") == 3
    wurk.api.RetrySet().schedule(time.time() + 60, {"class": "X", "args": [9], "jid": f"{9:024d}", "queue": "q"})
    assert "1 job moved from retry to their queues" in run(config, "retry-all", "retry").output  # not "1 jobs"


def test_processes_quiet_and_stop(workers, config, redis):
    worker = workers.start("-c", "2", "-g", "opsy")
    wait_for(lambda: redis.scard("processes") == 1, timeout=30)
    [process] = json.loads(run(config, "processes", "--json").output)
    assert (process["tag"], process["concurrency"], process["quiet"]) == ("opsy", 2, False)
    assert "opsy" in run(config, "top", "--once").output
    run(config, "quiet", process["identity"])
    wait_for(lambda: json.loads(run(config, "processes", "--json").output)[0]["quiet"], timeout=10)
    Slow.perform_async("never", 0)
    wait_until_fetching_ended(worker.log, worker.pid, lambda: worker.signal(signal.SIGTTIN))
    assert redis.llen("queue:default") == 1  # quiet: nothing fetched
    assert redis.llen("started") == 0
    run(config, "stop", "--all")
    assert worker.wait(30) == 0
    assert worker.proc.returncode != -signal.SIGKILL
    bad = CliRunner().invoke(build(config), ["quiet"], obj={"config": config})
    assert bad.exit_code == 2


def test_job_show_prints_arguments_as_json(config):
    jid = Record.perform_async({"to": "ann@example.com", "cc": None, "urgent": True})
    shown = run(config, "job", "show", jid).output
    [args] = [line for line in shown.splitlines() if line.startswith("args")]
    assert args.split(None, 1)[1] == '[{"to": "ann@example.com", "cc": null, "urgent": true}]'
    assert json.loads(run(config, "job", "show", jid, "--json").output)["args"] == [
        {"to": "ann@example.com", "cc": None, "urgent": True}
    ]


def test_pausing_an_unknown_queue_warns_but_pauses(config, redis):
    Record.set(queue="payments").perform_async(1)
    result = run(config, "pause", "paymets")
    assert result.exit_code == 0
    assert "no job has been pushed to queue 'paymets' yet; did you mean 'payments'? Pausing it anyway." in result.stderr
    assert redis.sismember("paused", "paymets")  # ahead of its first job, as Sidekiq allows
    known = run(config, "pause", "payments")
    assert (known.exit_code, known.stderr) == (0, "")
    refused = CliRunner().invoke(build(config), ["pause", "queue:payments"], obj={"config": config})
    assert refused.exit_code == 1
    assert "wurk pause payments" in refused.output
    assert not redis.sismember("paused", "queue:payments")


def schedule_retries(count):
    for n in range(count):
        wurk.api.RetrySet().schedule(time.time() + 60, {"class": "X", "args": [n], "jid": f"{n:024d}", "queue": "q"})


def test_kill_all_without_a_terminal_refuses_unless_told_yes(config, redis):
    schedule_retries(2)
    refused = run(config, "kill-all", "retry")  # CliRunner's stdin is not a terminal, as in cron
    assert refused.exit_code == 1
    assert "Move all 2 jobs in retry to the dead set? Not confirmed" in refused.output
    assert "--yes" in refused.output
    assert (redis.zcard("retry"), redis.zcard("dead")) == (2, 0)
    assert "2 jobs moved" in run(config, "kill-all", "retry", "-y").output
    assert (redis.zcard("retry"), redis.zcard("dead")) == (0, 2)
    assert run(config, "kill-all", "retry").output == "no jobs in retry\n"


def ask_on_a_terminal(redis_url, answer):
    """``wurk kill-all retry`` in a real pseudo-terminal, answering ``answer``."""
    import os
    import pty
    import select
    import subprocess
    import sys

    leader, follower = pty.openpty()
    env = {**os.environ, "REDIS_URL": redis_url}
    command = [sys.executable, "-m", "wurk.cli", "kill-all", "retry"]
    child = subprocess.Popen(command, stdin=follower, stdout=follower, stderr=follower, env=env)
    os.close(follower)
    seen = b""
    try:
        while b"[y/N]" not in seen:
            ready, _, _ = select.select([leader], [], [], 30)
            assert ready, f"no question asked; got {seen!r}"
            seen += os.read(leader, 1024)
        os.write(leader, answer + b"\n")
        assert child.wait(30) is not None
        while select.select([leader], [], [], 0.2)[0]:
            try:
                chunk = os.read(leader, 1024)
            except OSError:  # the terminal closed with the child
                break
            if not chunk:
                break
            seen += chunk
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        os.close(leader)
    return child.returncode, seen.decode()


def test_kill_all_on_a_terminal_asks_first(config, redis, redis_url):
    schedule_retries(3)
    code, said = ask_on_a_terminal(redis_url, b"n")
    assert "Move all 3 jobs in retry to the dead set? [y/N]" in said
    assert code == 1
    assert redis.zcard("retry") == 3
    code, said = ask_on_a_terminal(redis_url, b"y")
    assert code == 0
    assert "3 jobs moved from retry to the dead set" in said
    assert (redis.zcard("retry"), redis.zcard("dead")) == (0, 3)
