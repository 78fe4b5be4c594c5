"""The ``django.tasks`` API: Django's own (Django >= 6.0), else the ``django-tasks`` backport.

The two are the same framework under two names (a few exceptions are
spelled differently); the backend is written against the names here.
"""

from __future__ import annotations

from typing import Any

try:
    from django.tasks import Task, TaskContext, TaskResult, TaskResultStatus, task_backends
    from django.tasks.backends.base import BaseTaskBackend
    from django.tasks.base import TaskError
    from django.tasks.exceptions import InvalidTask, TaskResultDoesNotExist
    from django.tasks.signals import task_enqueued, task_finished, task_started

    SOURCE = "django.tasks"
except ImportError:  # Django < 6.0: the backport
    from django_tasks import TaskContext, TaskResult, TaskResultStatus, task_backends
    from django_tasks.backends.base import BaseTaskBackend
    from django_tasks.base import Task, TaskError
    from django_tasks.exceptions import InvalidTaskError as InvalidTask
    from django_tasks.exceptions import TaskResultDoesNotExist
    from django_tasks.signals import task_enqueued, task_finished, task_started

    SOURCE = "django_tasks"

__all__ = [
    "SOURCE",
    "BaseTaskBackend",
    "InvalidTask",
    "Task",
    "TaskContext",
    "TaskError",
    "TaskResult",
    "TaskResultDoesNotExist",
    "TaskResultStatus",
    "set_field",
    "task_backends",
    "task_enqueued",
    "task_finished",
    "task_started",
]


def set_field(obj: Any, name: str, value: Any) -> None:
    """Set a field of a frozen ``TaskResult``, as the framework's own backends do."""
    object.__setattr__(obj, name, value)
