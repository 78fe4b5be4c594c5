"""Run inside the example project: the checks Django's own backend tests make, against WurkBackend.

python contract.py enqueue         enqueue every contract task and try what must be refused; JSON
python contract.py results IDS     read each result back (sync and async APIs); JSON

The tasks are in ``shop/contract_tasks.py``, which the test writes.
"""

import asyncio
import json
import os
import sys

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "shopsite.settings")
django.setup()

from wurk.contrib.django import framework  # noqa: E402

from shop import contract_tasks as tasks  # noqa: E402


def refusal(call):
    try:
        call()
    except Exception as exc:  # the test judges the type and the message
        return {"type": type(exc).__name__, "message": str(exc)}
    return None


def enqueue():
    def local_task():
        from shop.contract_tasks import task

        def inner():
            return None

        task(inner)

    noop = tasks.noop.enqueue(1, two=3)
    ids = {
        "noop": noop.id,
        "noop_async": asyncio.run(tasks.noop_async.aenqueue()).id,
        "meaning": asyncio.run(framework.task_backends["default"].aenqueue(tasks.meaning, [], {})).id,
        "value_error": tasks.value_error.enqueue().id,
        "complex_exception": tasks.complex_exception.enqueue().id,
        "complex_return": tasks.complex_return.enqueue().id,
        "own_id": tasks.own_id.enqueue().id,
        "attempt": tasks.attempt.enqueue("x").id,
    }
    return {
        "ids": ids,
        "ready": {
            "status": str(noop.status),
            "args": noop.args,
            "kwargs": noop.kwargs,
            "enqueued": noop.enqueued_at is not None,
            "started": noop.started_at,
            "finished": noop.finished_at,
            "is_finished": noop.is_finished,
        },
        "refused": {
            "queue": refusal(lambda: tasks.noop.using(queue_name="nowhere").enqueue()),
            "queue_async": refusal(lambda: asyncio.run(tasks.noop.using(queue_name="nowhere").aenqueue())),
            "priority": refusal(lambda: tasks.noop.using(priority=10).enqueue()),
            "local_function": refusal(local_task),
            "argument": refusal(lambda: tasks.noop.enqueue({1, 2})),
            "unknown_id": refusal(lambda: tasks.noop.get_result("0" * 24)),
            "unknown_id_async": refusal(lambda: asyncio.run(tasks.noop.aget_result("0" * 24))),
        },
    }


def result_json(result):
    try:
        value = result.return_value
        value_error = None
    except ValueError as exc:
        value, value_error = None, str(exc)
    return {
        "status": str(result.status),
        "return_value": value,
        "return_value_error": value_error,
        "attempts": result.attempts,
        "args": result.args,
        "kwargs": result.kwargs,
        "worker_ids": len(result.worker_ids),
        "in_order": bool(
            result.enqueued_at
            and result.started_at
            and result.finished_at
            and result.enqueued_at <= result.started_at <= result.last_attempted_at <= result.finished_at
        ),
        "errors": [
            {"class": f"{e.exception_class.__module__}.{e.exception_class.__qualname__}", "traceback": e.traceback}
            for e in result.errors
        ],
    }


async def read_async(task, result_id):
    result = await task.aget_result(result_id)
    await result.arefresh()
    return result


def results(ids):
    seen = {}
    for name, result_id in ids.items():
        task = getattr(tasks, name)
        if name in ("meaning", "noop_async"):
            result = asyncio.run(read_async(task, result_id))
        else:
            result = task.get_result(result_id)
            result.refresh()
        seen[name] = {**result_json(result), "same_id": result.id == result_id, "same_task": result.task == task}
    return seen


if sys.argv[1] == "enqueue":
    print(json.dumps(enqueue()))
else:
    print(json.dumps(results(json.loads(sys.argv[2]))))
