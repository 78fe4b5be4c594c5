"""WurkBackend held to what Django's own task backends are tested for.

Django ships no contract suite for third-party task backends: its tests
(``tests/tasks`` in Django's repository) check the built-in backends one by
one. The checks those tests make that apply to a backend whose tasks run
elsewhere are made here, on a real worker: the fields of a result before and
after the run, async enqueue and retrieval, failures with their exception
class and traceback, a return value JSON cannot hold, tasks that take their
context, and what ``validate_task`` and ``get_result`` must refuse.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.django.test_django import Site, write_project
from tests.helpers import wait_for
from wurk.contrib.django import keys

pytest.importorskip("django")

CONTRACT_TASKS = """\
try:
    from django.tasks import task
except ImportError:
    from django_tasks import task


@task
def noop(*args, **kwargs):
    return None


@task
async def noop_async(*args, **kwargs):
    return None


@task
def meaning():
    return 42


@task(job_options={"retry": 0})
def value_error():
    raise ValueError("This task failed due to ValueError")


@task(job_options={"retry": 0})
def complex_exception():
    raise ValueError(ValueError("This task failed"))


@task(job_options={"retry": 0})
def complex_return():
    return {1, 2}


@task(takes_context=True)
def own_id(context):
    return context.task_result.id


@task(takes_context=True)
def attempt(context, word):
    return [context.attempt, word]
"""


@pytest.fixture
def site(tmp_path, redis_url):
    write_project(tmp_path)
    (tmp_path / "shop" / "contract_tasks.py").write_text(CONTRACT_TASKS, encoding="utf-8")
    (tmp_path / "contract.py").write_text((_here() / "contract.py").read_text(encoding="utf-8"), encoding="utf-8")
    project = Site(tmp_path, redis_url)
    project.run("manage.py", "migrate", "-v", "0")
    yield project
    for worker in project.workers:
        worker.stop(timeout=15)


def _here() -> Path:
    return Path(__file__).parent


def _contract(site: Site, *args: str) -> dict:
    return json.loads(site.run("contract.py", *args).stdout.strip().splitlines()[-1])


def _finished(redis, result_id: str) -> bool:
    raw = redis.get(keys.task_result(result_id))
    return bool(raw) and json.loads(raw)["status"] in ("SUCCESSFUL", "FAILED")


def test_the_checks_djangos_backend_tests_make_hold_on_a_real_worker(site, redis):
    enqueued = _contract(site, "enqueue")
    ids = enqueued["ids"]

    # Before a worker runs it: READY, with its arguments, not started.
    assert enqueued["ready"] == {
        "status": "READY",
        "args": [1],
        "kwargs": {"two": 3},
        "enqueued": True,
        "started": None,
        "finished": None,
        "is_finished": False,
    }

    # validate_task and get_result refuse what they must, naming it.
    refused = enqueued["refused"]
    for name in ("queue", "queue_async"):
        assert refused[name]["type"] in ("InvalidTask", "InvalidTaskError")
        assert "'nowhere'" in refused[name]["message"]
    assert refused["priority"]["type"] in ("InvalidTask", "InvalidTaskError")
    assert "priority" in refused["priority"]["message"]
    assert refused["local_function"]["type"] in ("InvalidTask", "InvalidTaskError")
    assert "module level" in refused["local_function"]["message"]
    assert refused["argument"]["type"] == "TypeError"  # the framework's own JSON check, before the push
    assert "set" in refused["argument"]["message"]
    for name in ("unknown_id", "unknown_id_async"):
        assert refused[name]["type"] == "TaskResultDoesNotExist"
    # Only the eight tasks were pushed: nothing refused reached Redis.
    assert redis.llen("queue:default") == len(ids)

    site.worker("-q", "default", "-c", "3")
    for result_id in ids.values():
        wait_for(lambda result_id=result_id: _finished(redis, result_id), timeout=60)
    seen = _contract(site, "results", json.dumps(ids))

    for name in ids:
        assert seen[name]["same_id"], name
        assert seen[name]["same_task"], name
        assert seen[name]["attempts"] == 1, name
        assert seen[name]["worker_ids"] == 1, name
        assert seen[name]["in_order"], name  # enqueued <= started <= last attempted <= finished
    for name in ("noop", "noop_async", "meaning", "own_id", "attempt"):
        assert seen[name]["status"] == "SUCCESSFUL", (name, seen[name])
        assert seen[name]["errors"] == [], name
    assert (seen["noop"]["args"], seen["noop"]["kwargs"], seen["noop"]["return_value"]) == ([1], {"two": 3}, None)
    assert seen["meaning"]["return_value"] == 42
    assert seen["own_id"]["return_value"] == ids["own_id"]
    assert seen["attempt"]["return_value"] == [1, "x"]

    for name in ("value_error", "complex_exception", "complex_return"):
        assert seen[name]["status"] == "FAILED", (name, seen[name])
        assert seen[name]["return_value_error"], name  # reading return_value of a failed task raises
        (error,) = seen[name]["errors"]
        assert error["traceback"].endswith("\n"), name
    (error,) = seen["value_error"]["errors"]
    assert error["class"] == "builtins.ValueError"
    assert error["traceback"].endswith("ValueError: This task failed due to ValueError\n")
    (error,) = seen["complex_exception"]["errors"]
    assert error["class"] == "builtins.ValueError"
    assert "This task failed" in error["traceback"]
    (error,) = seen["complex_return"]["errors"]
    assert error["class"] == "builtins.TypeError"
    assert "JSON" in error["traceback"]
