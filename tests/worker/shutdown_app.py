"""Jobs and a fetcher that park a processor thread inside each of its
critical sections, for the tests of a shutdown's interrupt
(``tests/worker/test_shutdown_interrupts.py``): the thread waits on
:data:`RELEASE` there, after setting :data:`PARKED`, until the test lets it go.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import wurk
from wurk.server.fetch import ReliableFetcher, UnitOfWork

PARKED = threading.Event()
RELEASE = threading.Event()
#: Set by a job that runs in the job's own code, outside every section.
STARTED = threading.Event()

#: How long a parked thread waits at most: a test that never releases it
#: fails on its own assertions, not on a thread left behind forever.
PARK_LIMIT = 60.0


def park() -> None:
    PARKED.set()
    RELEASE.wait(PARK_LIMIT)


def reset() -> None:
    for event in (PARKED, RELEASE, STARTED):
        event.clear()


def park_in_death_handler(job: dict[str, Any], exc: BaseException) -> None:
    """A death handler: it runs after the dead-set write, inside the booking."""
    if job["class"].endswith(".DiesAtOnce"):
        park()


class DiesAtOnce(wurk.Job, retry=0):
    def perform(self) -> None:
        raise ValueError("straight to the dead set")


class RetriesLater(wurk.Job, retry=5):
    @classmethod
    def retry_in(cls, count: int, exc: BaseException, job: dict[str, Any]) -> int:
        park()  # inside the booking, before the retry-set write
        return 3600

    def perform(self) -> None:
        raise ValueError("again in an hour")


class Succeeds(wurk.Job):
    def perform(self) -> None:
        pass


class Spins(wurk.Job):
    """Runs Python code until told to stop: an interrupt lands in it at once."""

    def perform(self) -> None:
        STARTED.set()
        while not RELEASE.is_set():
            time.sleep(0.01)


class ParkingFetcher(ReliableFetcher):
    """A reliable fetcher whose acknowledgement of ``Succeeds`` waits for the
    test first: the thread is then inside the acknowledgement's section."""

    def acknowledge(self, uow: UnitOfWork) -> None:
        if ".Succeeds" in (uow.job if isinstance(uow.job, str) else uow.job.decode()):
            park()
        super().acknowledge(uow)
