"""wurk.contrib.django in a real project: a copy of the example project
(examples/django_app, whose files docs/django.md shows), on a SQLite file,
with real workers started by ``manage.py wurk``.

The same tests run on Django 5.2 with the django-tasks backport (the main
environment) and on Django 6 with its built-in django.tasks (.ci/run's
Python 3.12 step).
"""

from __future__ import annotations

import json
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

import wurk
import wurk_web
from tests.helpers import ROOT, Subprocess, wait_for
from tests.web.live import client_for
from wurk.api import Queue, ScheduledSet
from wurk.contrib.django import keys

pytest.importorskip("django")

EXAMPLE = ROOT / "examples" / "django_app"
PAGE = ROOT / "docs" / "django.md"
FILE_BLOCK = re.compile(r"^```python file=(\S+)\n(.*?)^```", re.DOTALL | re.MULTILINE)


def write_project(root: Path) -> None:
    """A copy of the example project, which a test may add modules to."""
    shutil.copytree(EXAMPLE, root, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__", "*.sqlite3"))
    for script in ("probe.py", "calling.py"):
        shutil.copy(Path(__file__).with_name(script), root / script)


def test_every_file_the_page_shows_is_the_example_projects():
    files = FILE_BLOCK.findall(PAGE.read_text(encoding="utf-8"))
    shown = {name for name, _ in files}
    assert shown >= {"shopsite/settings.py", "shopsite/urls.py", "shop/views.py", "shop/jobs.py", "shop/tasks.py"}
    for name, source in files:
        assert (EXAMPLE / name).read_text(encoding="utf-8") == source, f"docs/django.md shows {name} otherwise"


class Site:
    def __init__(self, root: Path, redis_url: str) -> None:
        self.root = root
        self.env = {"REDIS_URL": redis_url, "DATABASE_PATH": str(root / "db.sqlite3"), "PYTHONPATH": str(root)}
        self.workers: list[Subprocess] = []

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [sys.executable, *args],
            cwd=self.root,
            env={**_base_env(), **self.env},
            capture_output=True,
            text=True,
            timeout=120,
        )
        if check:
            assert done.returncode == 0, done.stdout + done.stderr
        return done

    def probe(self, *args: str) -> dict:
        return json.loads(self.run("probe.py", *args).stdout.strip().splitlines()[-1])

    def worker(self, *args: str) -> Subprocess:
        return self.script("manage.py", "wurk", *args)

    def script(self, *args: str) -> Subprocess:
        """A long-running Python process in the project (a worker), stopped after the test."""
        log = self.root / f"worker-{len(self.workers)}.log"
        process = Subprocess([sys.executable, *args], env=self.env, cwd=self.root, log=log)
        self.workers.append(process)
        return process

    def rows(self, sql: str) -> list[tuple]:
        with sqlite3.connect(self.root / "db.sqlite3") as db:
            return db.execute(sql).fetchall()


def _base_env() -> dict[str, str]:
    import os

    return {key: value for key, value in os.environ.items() if key != "DJANGO_SETTINGS_MODULE"}


@pytest.fixture
def site(tmp_path, redis_url):
    write_project(tmp_path)
    project = Site(tmp_path, redis_url)
    project.run("manage.py", "migrate", "-v", "0")
    yield project
    for worker in project.workers:
        worker.stop(timeout=15)


def test_a_push_in_a_transaction_waits_for_the_commit_and_the_job_sees_the_row(site, redis):
    cancelled = site.probe("order", "lamp", "cancel")
    assert cancelled["status"] == 200
    assert re.fullmatch(r"[0-9a-f]{24}", cancelled["jid"])
    placed = site.probe("order", "desk")
    # The cancelled order's push was dropped with its row; the committed one's is in Redis.
    assert site.rows("select id, item from shop_order") == [(placed["order"], "desk")]
    (payload,) = [json.loads(raw) for raw in redis.lrange("queue:mail", 0, -1)]
    assert (payload["jid"], payload["args"]) == (placed["jid"], [placed["order"]])

    site.worker("-q", "mail", "-c", "2")
    wait_for(lambda: site.rows("select receipt_sent from shop_order") == [(1,)], timeout=60)
    wait_for(lambda: redis.get("stat:processed") == b"1", timeout=30)
    assert redis.zcard("retry") == 0
    assert redis.zcard("dead") == 0


def test_a_task_runs_on_a_worker_and_its_result_comes_back_through_django(site, redis, config):
    enqueued = site.probe("add", "2", "3")
    assert enqueued["status"] == "READY"
    greeted = site.probe("greet", "Ada")

    # The data API shows the task, not its wrapper.
    (record,) = Queue("default", config=config)
    assert record.klass == "wurk.contrib.django.backend.TaskWrapper"
    assert (record.display_class, record.display_args) == ("shop.tasks.add", [2, 3])
    assert record.jid == enqueued["id"]
    (mail,) = Queue("mail", config=config)
    assert (mail.display_class, mail.display_args) == ("shop.tasks.greet", ["Ada", {"punctuation": "?"}])
    assert mail["retry"] == 5
    assert mail["tags"] == ["greetings"]
    assert record["retry"] == 3  # the backend's JOB_OPTIONS
    assert redis.ttl(keys.task_result(enqueued["id"])) > 3000

    site.worker("-q", "default", "-q", "mail", "-c", "2")
    wait_for(lambda: _status(redis, enqueued["id"]) == "SUCCESSFUL", timeout=60)
    wait_for(lambda: _status(redis, greeted["id"]) == "SUCCESSFUL", timeout=60)
    result = site.probe("result", enqueued["id"])
    assert result["status"] == "SUCCESSFUL"
    assert result["return_value"] == 5
    assert result["attempts"] == 1
    assert result["args"] == [2, 3]
    assert result["before_refresh"] == "SUCCESSFUL"


FAILING_TASKS = """\
try:
    from django.tasks import task
except ImportError:
    from django_tasks import task


@task(job_options={"retry": 0})
def doomed():
    raise ValueError("no luck")


@task(job_options={"retry": 1})
def hopeful():
    raise ValueError("not yet")
"""


def test_a_failed_task_is_ready_while_a_retry_is_left_and_failed_after_the_last(site, redis):
    (site.root / "shop" / "failing_tasks.py").write_text(FAILING_TASKS, encoding="utf-8")
    doomed = site.probe("enqueue", "shop.failing_tasks.doomed")
    hopeful = site.probe("enqueue", "shop.failing_tasks.hopeful")
    site.worker("-q", "default", "-c", "2")
    wait_for(lambda: _status(redis, doomed["id"]) == "FAILED", timeout=60)
    wait_for(lambda: redis.zcard("retry") == 1, timeout=60)  # hopeful's first attempt failed, one retry left
    lost = site.probe("result-of", "shop.failing_tasks.doomed", doomed["id"])
    assert (lost["status"], lost["errors"]) == ("FAILED", 1)
    waiting = site.probe("result-of", "shop.failing_tasks.hopeful", hopeful["id"])
    assert (waiting["status"], waiting["errors"]) == ("READY", 1)


def test_an_async_task_runs_on_a_worker_and_returns_through_django(site, redis):
    site.probe("order", "desk")
    counted = site.probe("count")
    site.worker("-q", "default", "-c", "2")
    wait_for(lambda: _status(redis, counted["id"]) == "SUCCESSFUL", timeout=60)
    result = site.probe("count-result", counted["id"])
    assert (result["status"], result["return_value"], result["attempts"]) == ("SUCCESSFUL", 1, 1)


def test_a_task_enqueued_in_a_transaction_that_rolls_back_is_never_pushed(site, redis):
    undone = site.probe("add-undone", "4", "5")
    kept = site.probe("add", "6", "7")  # an end marker: pushed after the rolled-back one
    queued = [json.loads(raw)["jid"] for raw in redis.lrange("queue:default", 0, -1)]
    assert queued == [kept["id"]]
    assert redis.get(keys.task_result(undone["id"])) is None  # no result record either


def test_a_deferred_task_is_a_scheduled_job(site, redis, config):
    site.run(
        "-c",
        "import django, os; os.environ['DJANGO_SETTINGS_MODULE'] = 'shopsite.settings'; django.setup();"
        "from datetime import timedelta; from django.utils import timezone; from shop.tasks import add;"
        "print(add.using(run_after=timezone.now() + timedelta(hours=1)).enqueue(1, 1).id)",
    )
    (entry,) = ScheduledSet(config=config)
    assert entry.display_class == "shop.tasks.add"
    assert entry.display_args == [1, 1]
    assert entry.at.timestamp() > time.time() + 3000
    # The dashboard lists the task under its own name and arguments, not the wrapper's.
    with client_for(wurk_web.create_app(config)) as dashboard:
        (shown,) = dashboard.get("/api/sets/scheduled").json()["entries"]
    assert (shown["class"], shown["args"]) == ("shop.tasks.add", [1, 1])


def _status(redis, result_id: str) -> str | None:
    raw = redis.get(keys.task_result(result_id))
    return json.loads(raw)["status"] if raw else None


def test_the_dashboard_is_for_staff_behind_django_login(site, redis):
    seen = site.probe("dashboard")
    assert seen["anonymous"][0] == 302
    assert seen["anonymous"][1].startswith("/admin/login/?next=")
    assert seen["clerk"] == 403
    assert seen["staff"] == 200
    assert seen["base"]
    assert seen["queues"] == {"queues": []}
    assert seen["pause"] == 200
    assert redis.smembers("paused") == {b"mail"}


def test_a_forked_child_drops_the_parents_database_connection(site):
    seen = site.probe("fork")
    assert seen == {"child": "dropped", "parent_still_connected": True, "parent_works": 1}


def test_a_misspelt_wurk_setting_stops_the_project_in_one_line(site):
    settings = site.root / "shopsite" / "settings.py"
    settings.write_text(settings.read_text() + '\nWURK = {"concurency": 5}\n', encoding="utf-8")
    done = site.run("manage.py", "check", check=False)
    assert done.returncode != 0
    assert done.stderr.strip().splitlines()[-1] == (
        "django.core.exceptions.ImproperlyConfigured: "
        "settings.WURK: unknown option 'concurency'; did you mean 'concurrency'?"
    )


def test_manage_py_wurk_takes_the_wurk_flags(site):
    shown = site.run("manage.py", "wurk", "--help").stdout
    for flag in ("--concurrency", "--queue", "--timeout", "--config"):
        assert flag in shown
    refused = site.run("manage.py", "wurk", "-q", "queue:mail", check=False)
    assert refused.returncode == 2
    assert "queue:mail" in refused.stderr


def test_importing_wurk_imports_no_web_framework():
    code = "import sys, wurk, wurk.api, wurk.testing; print(json.dumps(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", f"import json; {code}"], capture_output=True, text=True, check=True)
    loaded = json.loads(done.stdout)
    tops = {name.split(".")[0] for name in loaded}
    assert tops.isdisjoint({"django", "django_tasks", "flask", "starlette", "fastapi", "asgiref"})
    assert not [name for name in loaded if name.startswith("wurk.contrib")]


CONNECTION_JOB = """\
import os

import redis
from django.db import connection

import wurk


class ConnectionJob(wurk.Job, queue="db"):
    def perform(self, n):
        fresh = connection.connection is None  # no connection left over from the thread's last job
        connection.ensure_connection()
        redis.Redis.from_url(os.environ["REDIS_URL"]).rpush("connection-seen", f"{n}:{fresh}")
"""


def test_each_job_starts_without_the_previous_jobs_database_connection(site, redis, config):
    # As a request does: a connection past CONN_MAX_AGE (0 by default) is closed
    # when a job ends, so the next job on the same thread opens its own.
    (site.root / "shop" / "connection_jobs.py").write_text(CONNECTION_JOB, encoding="utf-8")
    for n in range(3):
        wurk.Client(config).push({"class": "shop.connection_jobs.ConnectionJob", "args": [n], "queue": "db"})
    site.worker("-q", "db", "-c", "1")
    wait_for(lambda: redis.llen("connection-seen") == 3, timeout=60)
    assert [seen.decode() for seen in redis.lrange("connection-seen", 0, -1)] == ["0:True", "1:True", "2:True"]


CALLED_JOB = """\
import os

import redis

import wurk


class Called(wurk.Job, queue="critical"):
    def perform(self, label):
        redis.Redis.from_url(os.environ["REDIS_URL"]).rpush("called", f"{label}:{os.getpid()}")
"""


@pytest.mark.parametrize("mode", ["words", "keywords"])
def test_call_command_runs_a_worker_on_the_flags_given_and_returns_when_it_stops(site, redis, config, mode):
    # calling.py: call_command("wurk", "-q", "critical", "-c", "2"), or with
    # queue=["critical"], concurrency=2; the settings say 2 threads on default and mail.
    (site.root / "shop" / "called_jobs.py").write_text(CALLED_JOB, encoding="utf-8")
    client = wurk.Client(config)
    client.push({"class": "shop.called_jobs.Called", "args": ["elsewhere"], "queue": "default"})
    client.push({"class": "shop.called_jobs.Called", "args": ["critical"], "queue": "critical"})
    worker = site.script("calling.py", mode)
    wait_for(lambda: redis.llen("called") == 1, timeout=60)
    assert redis.lrange("called", 0, -1) == [f"critical:{worker.pid}".encode()]
    (identity,) = redis.smembers("processes")
    info = json.loads(redis.hget(identity, "info"))
    assert (info["pid"], info["concurrency"], info["queues"]) == (worker.pid, 2, ["critical"])
    assert redis.llen("queue:default") == 1  # not a queue this worker takes
    worker.signal(signal.SIGTERM)
    assert worker.wait(30) == 0
    assert "returned" in worker.output().splitlines()


def test_call_command_runs_a_subcommand_writes_to_stdout_and_raises_on_failure(site, redis):
    seen = json.loads(site.run("calling.py", "others").stdout.strip().splitlines()[-1])
    assert redis.smembers("paused") == {b"mail"}
    assert seen["stats"]["processed"] == 0
    assert seen["refused"] == [2, "wurk -q queue:mail exited with status 2"]
    assert "concurency" in seen["unknown"]
    assert "concurrency" in seen["unknown"]  # Django lists the valid ones


FORK_PROBE = """\
import json
import os

import redis
from django.db import connection

import wurk

# Loaded once, in the swarm's parent, before it forks: the parent opens a
# connection of its own and marks it with a temporary table, which only that
# connection sees.
PARENT = os.getpid()
with connection.cursor() as cursor:
    cursor.execute("CREATE TEMP TABLE opened_by_parent (pid INTEGER)")
PARENT_HANDLE = id(connection.connection)


def report(where):
    inherited = connection.connection is not None  # before anything opens one
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM sqlite_temp_master WHERE name = 'opened_by_parent'")
        (marked,) = cursor.fetchone()
    seen = {
        "where": where,
        "pid": os.getpid(),
        "parent": PARENT,
        "inherited": inherited,
        "parents_connection": bool(marked) or id(connection.connection) == PARENT_HANDLE,
    }
    redis.Redis.from_url(os.environ["REDIS_URL"]).rpush("fork-probe", json.dumps(seen))


@wurk.configure_server
def probe_each_child(config):
    # Startup runs in each child's main thread: the thread that forked, whose
    # connections the child inherits.
    config.on("startup", lambda: report("startup"))


class Probe(wurk.Job, queue="default"):
    def perform(self):
        report("job")
"""


def test_each_swarm_child_opens_its_own_database_connection_never_the_parents(site, redis, config):
    (site.root / "shop" / "fork_probe.py").write_text(FORK_PROBE, encoding="utf-8")
    site.env["WURK_COUNT"] = "2"
    swarm = site.script("manage.py", "wurk", "swarm", "-r", "shop.fork_probe", "-q", "default", "-c", "2")
    wait_for(lambda: redis.llen("fork-probe") >= 2, timeout=60)
    for _ in range(4):
        wurk.Client(config).push({"class": "shop.fork_probe.Probe", "args": [], "queue": "default"})
    wait_for(lambda: redis.llen("fork-probe") == 6, timeout=60)
    seen = [json.loads(raw) for raw in redis.lrange("fork-probe", 0, -1)]
    started = [entry for entry in seen if entry["where"] == "startup"]
    children = {entry["pid"] for entry in started}
    assert len(children) == 2
    assert swarm.pid not in children
    assert {entry["parent"] for entry in seen} == {swarm.pid}  # the probe was loaded in the parent
    assert {entry["pid"] for entry in seen} <= children  # every job ran in a child
    assert [(entry["inherited"], entry["parents_connection"]) for entry in seen] == [(False, False)] * 6


def test_keyword_options_become_the_flags_of_the_command_named_first():
    from wurk.contrib.django.management.commands.wurk import command_line, flags_from

    options = {"queues": ["a", "b,2"], "concurrency": 3, "verbose": True, "tag": None, "verbosity": 1}
    flags = flags_from(options)
    assert flags == ["--concurrency", "3", "--queue", "a", "--queue", "b,2", "--verbose"]
    assert flags_from({"queues": "a", "config_file": "wurk.yml"}) == ["--queue", "a", "--config", "wurk.yml"]
    assert command_line(["swarm", "-r", "app"], ["-c", "3"]) == ["swarm", "-c", "3", "-r", "app"]
    assert command_line(["-r", "app"], ["-c", "3"]) == ["-c", "3", "-r", "app"]
