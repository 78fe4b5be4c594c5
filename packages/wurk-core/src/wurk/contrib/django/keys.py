"""Every Redis key the Django integration writes.

``django-task:<result id>`` (STRING, JSON, with a TTL): a ``django.tasks``
task's result as :class:`~wurk.contrib.django.backend.WurkBackend` stores it:
its status, times, errors, worker ids and return value. The result id is the
job's jid, so the dashboard's job and Django's result are found by one id.
"""

from __future__ import annotations


def task_result(result_id: str) -> str:
    return f"django-task:{result_id}"
