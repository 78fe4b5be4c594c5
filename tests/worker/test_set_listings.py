"""``wurk retries``, ``wurk dead`` and ``wurk scheduled``: finding a job without
its jid, against a real server (and, for a dashboard retry, a real worker)."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import click
from click.testing import CliRunner

import wurk.api
from tests.helpers import wait_for
from tests.worker.worker_app import Boom
from wurk.cli.main import build


def run(config, *args: str) -> str:
    result = CliRunner().invoke(build(config), list(args), obj={"config": config}, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def listed(config, *args: str) -> list[str]:
    """The jids a listing prints with ``--json``, in its order."""
    return [entry["jid"] for entry in json.loads(run(config, *args, "--json"))]


def payload(jid: str, klass: str, queue: str, **fields: object) -> dict[str, object]:
    return {"class": klass, "args": [jid], "jid": jid, "queue": queue, **fields}


def ms(seconds_ago: float) -> int:
    return int((time.time() - seconds_ago) * 1000)


def failed(jid: str, klass: str, queue: str, failed_ago: float, retried_ago: float | None, count: int):
    fields: dict[str, object] = {
        "error_class": "ValueError",
        "error_message": f"broken {jid}",
        "failed_at": ms(failed_ago),
        "retry_count": count,
    }
    if retried_ago is not None:
        fields["retried_at"] = ms(retried_ago)
    return payload(jid, klass, queue, **fields)


def test_retries_are_listed_newest_failure_first_filtered_and_paged(config):
    now = time.time()
    retries = wurk.api.RetrySet()
    # The retry set is scored by the next attempt: a fifth failure a minute
    # ago waits longer than a first failure an hour ago. Newest failure first
    # is neither the set's order nor its reverse.
    retries.schedule(now + 30, failed("a" * 24, "app.jobs.HardJob", "default", 3600, None, 0))
    retries.schedule(now + 600, failed("b" * 24, "app.jobs.HardJob", "low", 7200, 60, 4))
    retries.schedule(now + 20, failed("c" * 24, "OtherJob", "default", 10, None, 0))
    a, b, c = "a" * 24, "b" * 24, "c" * 24

    assert listed(config, "retries") == [c, b, a]
    assert listed(config, "retries", "--class", "HardJob") == [b, a]  # the last part of the name
    assert listed(config, "retries", "--class", "app.jobs.HardJob", "--queue", "low") == [b]
    assert listed(config, "retries", "--class", "OtherJob", "--class", "HardJob", "--queue", "default") == [c, a]
    assert listed(config, "retries", "--per-page", "1", "--page", "2") == [b]
    assert listed(config, "retries", "--limit", "2", "--page", "2") == [a]

    [entry] = json.loads(run(config, "retries", "--queue", "low", "--json"))
    assert entry["id"] == f"{now + 600!r}|{b}"
    assert (entry["set"], entry["class"], entry["queue"], entry["retry_count"]) == (
        "retry",
        "app.jobs.HardJob",
        "low",
        4,
    )
    assert (entry["error_class"], entry["error_message"]) == ("ValueError", f"broken {b}")
    assert entry["at"].endswith("+00:00")
    assert entry["retried_at"] < entry["at"]
    assert entry["failed_at"] < entry["retried_at"]

    table = run(config, "retries", "--per-page", "2").splitlines()
    assert table[0].split() == ["FAILED", "NEXT", "TRY", "JID", "CLASS", "QUEUE", "RETRY", "ERROR"]
    assert table[1].split()[:9] == [
        "10s",
        "ago",
        "in",
        table[1].split()[3],
        c,
        "OtherJob",
        "default",
        "0",
        "ValueError:",
    ]
    assert table[2].split()[:2] == ["1m", "ago"]
    assert f"broken {b}" in table[2]
    assert table[-1] == "1-2 of 3 entries, page 1 of 2; next: wurk retries --page 2"
    assert run(config, "retries", "--class", "Nobody") == "no matching entries in retry\n"


def test_the_dead_set_is_listed_newest_death_first_and_paged_past_many_reads(config, redis):
    now = time.time()
    dead = wurk.api.DeadSet()
    # More entries than one read of the walk, every other one of the class asked for.
    for n in range(1200):
        klass = "app.Even" if n % 2 == 0 else "app.Odd"
        dead.schedule(now - n, failed(f"{n:024d}", klass, "default", n, None, 25))
    newest = [f"{n:024d}" for n in range(1200)]
    assert listed(config, "dead", "--per-page", "3") == newest[:3]
    evens = [jid for jid in newest if int(jid) % 2 == 0]
    assert listed(config, "dead", "--class", "Even", "--per-page", "100", "--page", "4") == evens[300:400]
    assert listed(config, "dead", "--class", "Even", "--per-page", "100", "--page", "6") == evens[500:600]
    assert listed(config, "dead", "--class", "Even", "--per-page", "100", "--page", "7") == []

    table = run(config, "dead", "--class", "Odd", "--per-page", "2").splitlines()
    assert table[0].split() == ["DIED", "JID", "CLASS", "QUEUE", "RETRY", "ERROR"]
    assert table[1].split()[2:7] == [f"{1:024d}", "app.Odd", "default", "25", "ValueError:"]
    assert table[-1] == "1-2 of the matching entries; next: wurk dead --page 2"
    assert run(config, "dead", "--per-page", "500", "--page", "3").splitlines()[-1] == (
        "1001-1200 of 1200 entries, page 3 of 3"
    )
    assert run(config, "dead", "--page", "99") == "no entries in dead on page 99\n"


def test_scheduled_jobs_are_listed_soonest_due_first(config):
    now = time.time()
    schedule = wurk.api.ScheduledSet()
    for jid, due, queue in (("l" * 24, 1000, "default"), ("s" * 24, 10, "mail"), ("m" * 24, 100, "default")):
        schedule.schedule(now + due, payload(jid, "app.Reminder", queue))
    assert listed(config, "scheduled") == ["s" * 24, "m" * 24, "l" * 24]
    assert listed(config, "scheduled", "--queue", "default", "--per-page", "1", "--page", "2") == ["l" * 24]
    table = run(config, "scheduled").splitlines()
    assert table[0].split() == ["DUE", "JID", "CLASS", "QUEUE", "ARGS"]
    assert table[1].split() == ["in", "9s", "s" * 24, "app.Reminder", "mail", f'["{"s" * 24}"]']
    assert table[3].split()[:2] == ["in", "16m"]
    assert table[-1] == "3 entries"


def test_the_console_script_lists_a_failed_job_by_its_class(config, redis_url):
    wurk.api.RetrySet().schedule(time.time() + 30, failed("f" * 24, "app.Payments", "billing", 5, None, 0))
    wurk_cli = shutil.which("wurk", path=str(Path(sys.executable).parent))
    assert wurk_cli, "the wurk console script must be installed"
    done = subprocess.run(
        [wurk_cli, "retries", "--class", "Payments"],
        env={"REDIS_URL": redis_url, "PATH": str(Path(sys.executable).parent)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    heading, row, footer = done.stdout.splitlines()
    assert heading.split()[:3] == ["FAILED", "NEXT", "TRY"]
    assert row.split()[4:8] == ["f" * 24, "app.Payments", "billing", "0"]
    assert row.endswith("ValueError: broken " + "f" * 24)
    assert footer == "1 matching entry"


def test_a_job_retried_by_hand_shows_its_given_back_attempt_and_a_failure_books_retry_0_again(workers, config, redis):
    """A retry from the dashboard (``SortedEntry.retry``, what its Retry
    button and ``wurk job retry`` call) gives the attempt back, as Sidekiq's
    ``SortedEntry#retry`` does: ``retry_count`` goes one lower, so a job that
    failed once waits in its queue with -1, and its next failure is booked
    as retry 0 again, not 1."""
    jid = Boom.perform_async("once")
    worker = workers.start("-c", "1")
    wait_for(lambda: redis.zcard("retry") == 1, timeout=30)
    worker.signal(signal.SIGTERM)
    assert worker.wait(30) == 0
    assert [entry["retry_count"] for entry in json.loads(run(config, "retries", "--json"))] == [0]

    assert wurk.api.RetrySet().find_job(jid).retry() is not None
    shown = json.loads(run(config, "job", "show", jid, "--json"))
    assert (shown["where"], shown["retry_count"]) == ("queue:default", -1)  # the wire value, as Sidekiq leaves it
    rows = dict(line.split(None, 1) for line in run(config, "job", "show", jid).splitlines())
    assert rows["retry_count"] == (
        "-1 (retried by hand: this run does not use up an attempt; a failure is booked as retry 0)"
    )

    again = workers.start("-c", "1")
    wait_for(lambda: redis.zcard("retry") == 1, timeout=30)
    again.signal(signal.SIGTERM)
    assert again.wait(30) == 0
    [entry] = json.loads(run(config, "retries", "--json"))
    assert (entry["jid"], entry["retry_count"]) == (jid, 0)
    assert json.loads(run(config, "job", "show", jid, "--json"))["retry_count"] == 0


def test_every_command_and_job_subcommand_says_what_it_does(config):
    def walk(command: click.Command, path: str) -> list[str]:
        missing = [] if (command.help or "").strip() else [path]
        missing += [
            f"{path} {' / '.join(option.opts)}"
            for option in command.params
            if isinstance(option, click.Option) and not option.hidden and not option.help
        ]
        if isinstance(command, click.Group):
            for name, sub in command.commands.items():
                missing += walk(sub, f"{path} {name}")
        return missing

    cli = build(config)
    assert walk(cli, "wurk") == []
    assert {"show", "retry", "kill", "delete"} <= set(cli.commands["job"].commands)  # type: ignore[attr-defined]
    assert {"retries", "dead", "scheduled"} <= set(cli.commands)
