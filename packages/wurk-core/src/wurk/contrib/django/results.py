"""A ``django.tasks`` result as Redis keeps it, and back.

The record is one JSON string under :func:`keys.task_result`, written when
the task is pushed (``READY``) and rewritten by the worker as the task starts
(``RUNNING``) and ends (``SUCCESSFUL`` with its return value, or ``FAILED``
with its errors); each write sets the TTL again, so a result lives
``RESULT_TTL`` seconds after its last change. Times are ISO 8601 strings.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from wurk.config.configuration import Config
from wurk.contrib.django import framework, keys

#: How long a result is kept after its last change, unless the backend's
#: ``OPTIONS["RESULT_TTL"]`` says otherwise: a day, as a job's profile.
DEFAULT_RESULT_TTL = 24 * 60 * 60

TIMES = ("enqueued_at", "started_at", "finished_at", "last_attempted_at", "run_after")


class ResultStore:
    """Reads and writes the result records of one configuration's Redis."""

    def __init__(self, config: Config, ttl: int = DEFAULT_RESULT_TTL) -> None:
        self.config = config
        self.ttl = ttl

    def save(self, record: dict[str, Any]) -> None:
        text = json.dumps(record, separators=(",", ":"))
        key = keys.task_result(record["id"])
        self.config.redis_pool.execute(lambda conn: conn.set(key, text, ex=self.ttl))

    def load(self, result_id: str) -> dict[str, Any] | None:
        raw = self.config.redis_pool.execute(lambda conn: conn.get(keys.task_result(result_id)))
        if raw is None:
            return None
        record = json.loads(raw)
        return record if isinstance(record, dict) else None


def stamp(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def unstamp(value: Any) -> datetime | None:
    return datetime.fromisoformat(value) if isinstance(value, str) else None


def new_record(result: Any, queue: str) -> dict[str, Any]:
    """The record of a result just enqueued (``result`` is a ``TaskResult``)."""
    task = result.task
    return {
        "id": result.id,
        "task_path": task.module_path,
        "backend": result.backend,
        "queue_name": queue,
        "run_after": stamp(task.run_after),
        "status": str(result.status),
        "enqueued_at": stamp(result.enqueued_at),
        "started_at": None,
        "finished_at": None,
        "last_attempted_at": None,
        "args": result.args,
        "kwargs": result.kwargs,
        "errors": [],
        "worker_ids": [],
        "return_value": None,
    }


def to_result(record: dict[str, Any], task: Any) -> Any:
    """The ``TaskResult`` a record describes, for ``task`` (its ``Task``)."""
    result = framework.TaskResult(
        task=task,
        id=record["id"],
        status=framework.TaskResultStatus(record["status"]),
        enqueued_at=unstamp(record.get("enqueued_at")),
        started_at=unstamp(record.get("started_at")),
        finished_at=unstamp(record.get("finished_at")),
        last_attempted_at=unstamp(record.get("last_attempted_at")),
        args=list(record.get("args") or []),
        kwargs=dict(record.get("kwargs") or {}),
        backend=record["backend"],
        errors=[framework.TaskError(**error) for error in record.get("errors") or []],
        worker_ids=list(record.get("worker_ids") or []),
    )
    framework.set_field(result, "_return_value", record.get("return_value"))
    return result
