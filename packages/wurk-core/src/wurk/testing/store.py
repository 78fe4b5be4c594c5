"""The fake store of ``fake`` mode: payloads by queue, guarded by a lock.

Payloads are kept in one list per queue, and those lists are live: what
``queues["default"]`` returns *is* the store's list. Each payload the store
files itself also gets a sequence number, so that a class's jobs come back in
push order even when they went to several queues.

The lock is never held while a job runs (the testing module takes a payload
out, releases the lock, then runs it), so a job that pushes more jobs while
being drained neither deadlocks nor escapes the drain.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from typing import Any

from wurk.client import payload as wire
from wurk.client.interception import FakeJobs
from wurk.types import Payload

__all__ = ["FakeJobs", "Queues"]

#: Sort key of payloads added to a live list by hand: after everything filed.
_UNFILED = float("inf")


class Queues:
    """Fake payloads by queue name (what ``wurk.testing.queues`` is)."""

    def __init__(self) -> None:
        self._by_queue: dict[str, list[Payload]] = {}
        # id(payload) -> (sequence, payload). The entry keeps the payload alive,
        # so its id cannot be reused by another object while it is filed here.
        self._filed: dict[int, tuple[int, Payload]] = {}
        self._counter = itertools.count()
        self._lock = threading.RLock()

    def __getitem__(self, queue: str) -> list[Payload]:
        """The live list of one queue: mutating it mutates the store."""
        with self._lock:
            return self._by_queue.setdefault(queue, [])

    def __len__(self) -> int:
        with self._lock:
            return sum(len(jobs) for jobs in self._by_queue.values())

    def __repr__(self) -> str:
        with self._lock:
            sizes = {queue: len(jobs) for queue, jobs in self._by_queue.items() if jobs}
        return f"<wurk.testing.queues {sizes}>"

    def push(self, queue: str, job_class: Any, job: Payload) -> None:
        """File ``job`` under ``queue``; ``job_class`` (a class or its wire
        name) fills in the payload's ``class`` when it has none."""
        if "class" not in job:
            job["class"] = wire.class_name(job_class)
        with self._lock:
            self._by_queue.setdefault(queue, []).append(job)
            self._filed[id(job)] = (next(self._counter), job)

    def _sequence(self, job: Payload) -> float:
        entry = self._filed.get(id(job))
        return entry[0] if entry is not None and entry[1] is job else _UNFILED

    def _ordered(self, keep: Callable[[Payload], bool]) -> list[Payload]:
        with self._lock:
            found = [job for jobs in self._by_queue.values() for job in jobs if keep(job)]
            return sorted(found, key=self._sequence)

    def jobs(self) -> list[Payload]:
        """Every payload, all queues, in push order."""
        return self._ordered(lambda job: True)

    def jobs_by_queue(self) -> dict[str, list[Payload]]:
        """The live mapping of queue name to payloads."""
        return self._by_queue

    def jobs_by_class(self) -> dict[str, list[Payload]]:
        """A new mapping of wire class name to payloads, in push order."""
        grouped: dict[str, list[Payload]] = {}
        for job in self.jobs():
            grouped.setdefault(job.get("class", ""), []).append(job)
        return grouped

    def jobs_for_class(self, job_class: Any) -> list[Payload]:
        """The payloads of one class (or wire name), across queues, in push order."""
        name = wire.class_name(job_class)
        return self._ordered(lambda job: job.get("class") == name)

    def _remove_where(self, keep_out: Callable[[Payload], bool], queue: str | None = None) -> None:
        with self._lock:
            lists = [self._by_queue.get(queue, [])] if queue is not None else list(self._by_queue.values())
            for jobs in lists:
                for job in jobs:
                    if keep_out(job):
                        self._filed.pop(id(job), None)
                jobs[:] = [job for job in jobs if not keep_out(job)]

    def delete_for(self, jid: str, queue: str, job_class: Any) -> None:
        """Drop the payload of one jid from one queue."""
        name = wire.class_name(job_class)
        self._remove_where(lambda job: job.get("jid") == jid and job.get("class") == name, queue)

    def clear_for(self, queue: str, job_class: Any) -> None:
        """Drop one class's payloads from one queue."""
        name = wire.class_name(job_class)
        self._remove_where(lambda job: job.get("class") == name, queue)

    def clear_class(self, job_class: Any) -> None:
        """Drop one class's payloads from every queue."""
        name = wire.class_name(job_class)
        self._remove_where(lambda job: job.get("class") == name)

    def clear_all(self) -> None:
        """Empty the store. Lists handed out earlier are emptied too."""
        with self._lock:
            for jobs in self._by_queue.values():
                jobs.clear()
            self._by_queue.clear()
            self._filed.clear()

    def take_first(self, job_class: Any | None = None) -> Payload | None:
        """Remove and return the oldest payload of ``job_class`` (of any class
        when ``None``), or ``None`` when there is none."""
        name = None if job_class is None else wire.class_name(job_class)
        with self._lock:
            best: tuple[float, list[Payload], int] | None = None
            for jobs in self._by_queue.values():
                # Within one queue, filed payloads are in push order, so only the
                # first match of each queue can be the oldest overall.
                for index, job in enumerate(jobs):
                    if name is None or job.get("class") == name:
                        sequence = self._sequence(job)
                        if best is None or sequence < best[0]:
                            best = (sequence, jobs, index)
                        break
            if best is None:
                return None
            job = best[1].pop(best[2])
            self._filed.pop(id(job), None)
            return job

    def take_any(self) -> Payload | None:
        """Remove and return the oldest payload of any class."""
        return self.take_first(None)
