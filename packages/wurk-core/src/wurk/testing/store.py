"""The fake store of ``fake`` mode: payloads by queue, guarded by a lock.

The lock is never held while a job runs, so a job that pushes more jobs while
being drained neither deadlocks nor escapes the drain.
"""

from __future__ import annotations

import threading
from typing import Any

Payload = dict[str, Any]


class Queues:
    def __init__(self) -> None:
        self._by_queue: dict[str, list[Payload]] = {}
        self._lock = threading.RLock()

    def __getitem__(self, queue: str) -> list[Payload]:
        """The live list of one queue: mutating it mutates the store."""
        with self._lock:
            return self._by_queue.setdefault(queue, [])

    def push(self, queue: str, job_class: str, job: Payload) -> None:
        with self._lock:
            self._by_queue.setdefault(queue, []).append(job)

    def jobs(self) -> list[Payload]:
        """Every payload, all queues, flattened."""
        with self._lock:
            return [job for jobs in self._by_queue.values() for job in jobs]

    def jobs_by_queue(self) -> dict[str, list[Payload]]:
        """The live mapping of queue name to payloads."""
        return self._by_queue

    def jobs_by_class(self) -> dict[str, list[Payload]]:
        with self._lock:
            grouped: dict[str, list[Payload]] = {}
            for job in self.jobs():
                grouped.setdefault(job["class"], []).append(job)
            return grouped

    def jobs_for_class(self, job_class: str) -> list[Payload]:
        with self._lock:
            return [job for job in self.jobs() if job["class"] == job_class]

    def delete_for(self, jid: str, queue: str, job_class: str) -> None:
        with self._lock:
            jobs = self._by_queue.get(queue, [])
            jobs[:] = [job for job in jobs if not (job["jid"] == jid and job["class"] == job_class)]

    def clear_for(self, queue: str, job_class: str) -> None:
        with self._lock:
            jobs = self._by_queue.get(queue, [])
            jobs[:] = [job for job in jobs if job["class"] != job_class]

    def clear_class(self, job_class: str) -> None:
        with self._lock:
            for jobs in self._by_queue.values():
                jobs[:] = [job for job in jobs if job["class"] != job_class]

    def clear_all(self) -> None:
        with self._lock:
            for jobs in self._by_queue.values():
                jobs.clear()

    def take_first(self, job_class: str) -> Payload | None:
        """Remove and return the oldest payload of ``job_class``."""
        with self._lock:
            for jobs in self._by_queue.values():
                for index, job in enumerate(jobs):
                    if job["class"] == job_class:
                        return jobs.pop(index)
        return None

    def take_any(self) -> Payload | None:
        with self._lock:
            for jobs in self._by_queue.values():
                if jobs:
                    return jobs.pop(0)
        return None
