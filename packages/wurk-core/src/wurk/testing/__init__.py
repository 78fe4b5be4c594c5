"""Testing modes: run or collect jobs in-process instead of writing to Redis.

Three modes, read by the client at the one place every push goes through:

* ``disable`` (the default): pushes go to Redis, as in production;
* ``fake``: pushes are collected in an in-memory store (:data:`queues`), and
  nothing runs until a test drains them;
* ``inline``: each job runs at once, in the pushing thread.

Each setter works two ways::

    wurk.testing.fake()             # process-wide, until changed

    with wurk.testing.inline():     # this thread, this block only
        OrderJob.perform_async(1)   # runs right here

A block inside a globally set mode is scoped properly (the thread's mode wins);
nesting two blocks raises :class:`TestModeAlreadySetError`.

Client middleware runs in every mode. Inline execution and draining go through
:data:`server_middleware`, a separate chain that starts empty, not the
production server chain. There is no retry, logging, stats or heartbeat on
this path: exceptions propagate to the test.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any

from wurk import payload as wire
from wurk.errors import WurkError
from wurk.middleware import Chain
from wurk.testing.store import Queues

if TYPE_CHECKING:
    from wurk.client import Client

__all__ = [
    "EmptyQueueError",
    "TestModeAlreadySetError",
    "disable",
    "disabled",
    "drain",
    "drain_all",
    "enabled",
    "fake",
    "inline",
    "is_fake",
    "is_inline",
    "mode",
    "perform_one",
    "process_job",
    "queues",
    "server_middleware",
]

MODES = ("disable", "fake", "inline")


class TestModeAlreadySetError(WurkError, RuntimeError):
    """A testing-mode block was opened inside another one on the same thread."""


class EmptyQueueError(WurkError, LookupError):
    """``perform_one`` found no fake job for the class."""


#: The fake store (Sidekiq's ``Queues``).
queues = Queues()

#: The server chain used by inline execution and draining; empty by default.
server_middleware = Chain()

_global_mode = "disable"
_local = threading.local()


def mode() -> str:
    """The mode in force for this thread."""
    return getattr(_local, "mode", None) or _global_mode


def enabled() -> bool:
    return mode() != "disable"


def disabled() -> bool:
    return mode() == "disable"


def is_fake() -> bool:
    return mode() == "fake"


def is_inline() -> bool:
    return mode() == "inline"


class _ModeSetting:
    """Returned by the setters: the global switch already happened; entering it
    as a context manager turns it into a thread-local one instead."""

    def __init__(self, new_mode: str) -> None:
        global _global_mode
        self.mode = new_mode
        self._previous_global = _global_mode
        _global_mode = new_mode

    def __enter__(self) -> _ModeSetting:
        global _global_mode
        _global_mode = self._previous_global
        if getattr(_local, "mode", None) is not None:
            raise TestModeAlreadySetError(
                f"testing mode {_local.mode!r} is already set for this block; set the outer mode globally instead"
            )
        _local.mode = self.mode
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        _local.mode = None

    def __repr__(self) -> str:
        return f"<wurk.testing mode {self.mode}>"


def fake() -> _ModeSetting:
    """Collect pushed jobs in :data:`queues` (process-wide, or this block)."""
    return _ModeSetting("fake")


def inline() -> _ModeSetting:
    """Run pushed jobs at once, in the pushing thread (process-wide, or this block)."""
    return _ModeSetting("inline")


def disable() -> _ModeSetting:
    """Write pushed jobs to Redis, as in production (process-wide, or this block)."""
    return _ModeSetting("disable")


def intercept(payloads: Sequence[dict[str, Any]], client: Client) -> None:
    """Called by the client instead of writing to Redis when a mode is on."""
    now = wire.now_ms()
    current = mode()
    for payload in payloads:
        job = dict(payload)
        if job.get("at") is None:
            job.pop("at", None)
            job["enqueued_at"] = now
        else:
            job.pop("enqueued_at", None)
        job = wire.loads(wire.dumps(job))  # exactly what a worker would read
        if current == "fake":
            queues.push(job["queue"], job["class"], job)
        else:
            job_class = client.config.jobs.resolve(job["class"])
            process_job(job_class, job)


def run_inline(job_class: type, job: dict[str, Any], chain: Chain) -> Any:
    """Instantiate ``job_class`` for ``job`` and run it through ``chain``."""
    job = wire.loads(wire.dumps(job))
    instance = job_class()
    instance.jid = job.get("jid")
    if job.get("bid"):
        instance.bid = job["bid"]
    result: list[Any] = [None]

    def perform() -> Any:
        result[0] = job_class.execute_job(instance, job["args"])
        return result[0]

    chain.invoke(instance, job, job.get("queue"), final=perform)
    return result[0]


def process_job(job_class: type, job: dict[str, Any]) -> Any:
    """Run one payload through the testing server chain."""
    return run_inline(job_class, job, server_middleware)


def _resolver() -> Any:
    from wurk.defaults import default_config

    return default_config().jobs


def drain(job_class: type) -> int:
    """Run and remove every fake job of ``job_class``, including ones pushed
    while draining; the number run."""
    name = wire.class_name(job_class)
    count = 0
    while True:
        job = queues.take_first(name)
        if job is None:
            return count
        process_job(job_class, job)
        count += 1


def perform_one(job_class: type) -> Any:
    job = queues.take_first(wire.class_name(job_class))
    if job is None:
        raise EmptyQueueError(f"no fake jobs for {wire.class_name(job_class)}")
    return process_job(job_class, job)


def drain_all() -> int:
    """Run fake jobs of every class until the store is empty; the number run."""
    registry = _resolver()
    count = 0
    while True:
        job = queues.take_any()
        if job is None:
            return count
        process_job(registry.resolve(job["class"]), job)
        count += 1
