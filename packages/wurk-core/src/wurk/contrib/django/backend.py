"""A backend for Django's task framework: ``@task`` functions run as Wurk jobs.

Configure it in ``settings.TASKS`` (Django >= 6.0's ``django.tasks``, or the
``django-tasks`` backport on Django 5.2)::

    TASKS = {
        "default": {
            "BACKEND": "wurk.contrib.django.backend.WurkBackend",
            "QUEUES": ["default", "mail"],
            "OPTIONS": {"RESULT_TTL": 86400, "JOB_OPTIONS": {"retry": 5}},
        }
    }

A task is pushed as a job of :class:`TaskWrapper` on the task's
``queue_name``, carrying the task's path and arguments in the shape the data
API and the dashboard unwrap (``wurk.client.payload.DJANGO_TASK_WRAPPERS``):
``"wrapped": "<task path>"`` and one argument ``{"task_path", "args",
"kwargs"}``; a worker runs it like any job, with Wurk's retries. Its result
is kept in Redis (:mod:`wurk.contrib.django.results`) under the job's jid,
which is the result's id.

What the backend declares: ``run_after`` (a scheduled push), async task
functions, and results readable from any process. Priority is not
supported (Wurk orders work by queue weights, not per job): give urgent
tasks a queue of their own. Wurk's job options reach a task through
``OPTIONS["JOB_OPTIONS"]`` (every task) and ``@task(job_options={...})``
(one task; the decorator takes it when the task's backend is this one).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import socket
import sys
from collections.abc import Callable
from typing import Any

from django.utils import timezone
from django.utils.module_loading import import_string

import wurk
from wurk.client import payload as wire
from wurk.client.transactional import TransactionAwareClient
from wurk.config.defaults import current_config
from wurk.contrib.django import framework, results, transaction
from wurk.current import current_job
from wurk.server.retry import retries_enabled

#: The wire class of every task's job (``wurk.client.payload.DJANGO_TASK_WRAPPERS``).
WIRE_CLASS = "wurk.contrib.django.backend.TaskWrapper"


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class WurkTask(framework.Task):
    """A task with Wurk job options of its own: ``@task(job_options={"retry": 3})``."""

    job_options: dict[str, Any] = dataclasses.field(default_factory=dict)


class WurkBackend(framework.BaseTaskBackend):
    """``django.tasks`` on Wurk: enqueue pushes a job, a Wurk worker runs it."""

    task_class = WurkTask
    supports_defer = True
    supports_async_task = True
    supports_get_result = True
    supports_priority = False

    def __init__(self, alias: str, params: dict[str, Any]) -> None:
        super().__init__(alias, params)
        options = self.options
        self.result_ttl = int(options.get("RESULT_TTL", results.DEFAULT_RESULT_TTL))
        self.enqueue_on_commit = bool(options.get("ENQUEUE_ON_COMMIT", True))
        self.job_options: dict[str, Any] = dict(options.get("JOB_OPTIONS", {}))

    def store(self) -> results.ResultStore:
        """The results of the configuration running this code (the worker's in a job)."""
        return results.ResultStore(current_config(), self.result_ttl)

    def enqueue(self, task: Any, args: Any, kwargs: Any) -> Any:
        """Push the task's job and return its ``READY`` result at once.

        Inside ``transaction.atomic()`` the record and the push wait for the
        commit (``OPTIONS["ENQUEUE_ON_COMMIT"]``, on by default), and are
        dropped on rollback; the arguments are checked now either way.
        """
        self.validate_task(task)
        result = framework.TaskResult(
            task=task,
            id=wire.new_jid(),
            status=framework.TaskResultStatus.READY,
            enqueued_at=timezone.now(),
            started_at=None,
            finished_at=None,
            last_attempted_at=None,
            args=list(args),
            kwargs=dict(kwargs),
            backend=self.alias,
            errors=[],
            worker_ids=[],
        )
        item: dict[str, Any] = {
            **self.job_options,
            **getattr(task, "job_options", {}),
            "class": WIRE_CLASS,
            "wrapped": task.module_path,
            "queue": task.queue_name,
            "args": [{"task_path": task.module_path, "args": result.args, "kwargs": result.kwargs}],
            "jid": result.id,
        }
        if task.run_after is not None:
            item["at"] = task.run_after.timestamp()
        store = self.store()
        record = results.new_record(result, task.queue_name)
        later = transaction.defer if self.enqueue_on_commit else _now

        def push_with_record(push: Callable[[], object]) -> object:
            def both() -> object:
                store.save(record)
                return push()

            return later(both)

        TransactionAwareClient(store.config, defer=push_with_record).push(item)
        framework.task_enqueued.send(type(self), task_result=result)
        return result

    def get_result(self, result_id: str) -> Any:
        record = self.store().load(result_id)
        if record is None:
            raise framework.TaskResultDoesNotExist(result_id)
        task = load_task(record["task_path"]).using(
            queue_name=record.get("queue_name"),
            run_after=results.unstamp(record.get("run_after")),
            backend=record.get("backend"),
        )
        return results.to_result(record, task)


def _now(callback: Callable[[], object]) -> object:
    return callback()


def load_task(path: str) -> Any:
    """The ``Task`` at ``path``, imported only from the project's own code.

    A path comes from Redis, which anyone with access can write, so it may
    import a module only when it is already imported or lies in an installed
    app (or a configured ``job_packages`` entry), as for job classes
    (:mod:`wurk.client.registry`).
    """
    module, _, _name = path.rpartition(".")
    if module not in sys.modules and not _project_module(module):
        raise LookupError(f"{path!r} is not a task of an installed app; nothing was imported")
    found = import_string(path)
    if not isinstance(found, framework.Task):
        raise LookupError(f"{path!r} is not a task (a function decorated with @task)")
    return found


def _project_module(module: str) -> bool:
    from django.apps import apps

    packages = [app.name for app in apps.get_app_configs()] + list(current_config().jobs.allowed)
    if not any(module == package or module.startswith(package + ".") for package in packages):
        return False
    return importlib.util.find_spec(module) is not None


class TaskWrapper(wurk.Job):
    """The job that runs one ``django.tasks`` task and records its result."""

    def perform(self, envelope: dict[str, Any]) -> None:
        task = load_task(envelope["task_path"])
        backend = framework.task_backends[task.backend]
        store = backend.store() if isinstance(backend, WurkBackend) else results.ResultStore(self.config)
        jid = str(self.jid)
        record = store.load(jid) or _lost_record(jid, task, envelope)
        result = results.to_result(record, task)
        now = timezone.now()
        record.update(status="RUNNING", started_at=record["started_at"] or now.isoformat())
        record.update(last_attempted_at=now.isoformat(), worker_ids=[*record["worker_ids"], _worker_id()])
        store.save(record)
        result = results.to_result(record, task)
        framework.task_started.send(type(backend), task_result=result)
        try:
            if task.takes_context:
                value = task.call(framework.TaskContext(task_result=result), *result.args, **result.kwargs)
            else:
                value = task.call(*result.args, **result.kwargs)
            record["return_value"] = _json(value)
        except BaseException as exc:
            _failed(store, record, exc, final=not retries_enabled((current_job.get() or {}).get("retry")))
            framework.task_finished.send(type(backend), task_result=results.to_result(record, task))
            raise
        record.update(status="SUCCESSFUL", finished_at=timezone.now().isoformat())
        store.save(record)
        framework.task_finished.send(type(backend), task_result=results.to_result(record, task))

    @classmethod
    def retries_exhausted(cls, job: dict[str, Any], exc: BaseException) -> str | None:
        """No retry is left: the task's result is ``FAILED`` for good."""
        store = results.ResultStore(current_config())
        record = store.load(str(job.get("jid")))
        if record is not None and record["status"] != "FAILED":
            record.update(status="FAILED", finished_at=timezone.now().isoformat())
            store.save(record)
        return None


def _failed(store: results.ResultStore, record: dict[str, Any], exc: BaseException, *, final: bool) -> None:
    """Book a failed attempt: its error, and ``FAILED`` if no retry follows
    (``READY`` otherwise: the task is to be run again)."""
    import traceback

    error = {
        "exception_class_path": f"{type(exc).__module__}.{type(exc).__qualname__}",
        "traceback": "".join(traceback.format_exception(exc)),
    }
    record["errors"] = [*record["errors"], error]
    if final:
        record.update(status="FAILED", finished_at=timezone.now().isoformat())
    else:
        record["status"] = "READY"
    store.save(record)


def _json(value: Any) -> Any:
    """The return value as JSON keeps it; refused (a failure) when it is not JSON."""
    from wurk.client.payload import find_complex

    problem = find_complex(value, "return value")
    if problem:
        raise TypeError(f"a task's return value must be JSON: {problem}")
    return value


def _lost_record(jid: str, task: Any, envelope: dict[str, Any]) -> dict[str, Any]:
    """A record for a task whose result expired (or was never written by an
    older client): recorded from now on, enqueued time unknown."""
    result = framework.TaskResult(
        task=task,
        id=jid,
        status=framework.TaskResultStatus.READY,
        enqueued_at=None,
        started_at=None,
        finished_at=None,
        last_attempted_at=None,
        args=list(envelope.get("args") or []),
        kwargs=dict(envelope.get("kwargs") or {}),
        backend=task.backend,
        errors=[],
        worker_ids=[],
    )
    return results.new_record(result, task.queue_name)


def _worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


__all__ = ["WIRE_CLASS", "TaskWrapper", "WurkBackend", "WurkTask", "load_task"]
