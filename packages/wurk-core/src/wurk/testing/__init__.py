"""Testing modes: run or collect jobs in-process instead of writing to Redis.

Three modes, read by the client at the one place every push goes through
(``Client.raw_push``), after the client middleware has run:

* ``disable`` (the default): pushes go to Redis, as in production;
* ``fake``: pushes are collected in an in-memory store (:data:`queues`), and
  nothing runs until a test drains them;
* ``inline``: each job runs at once, in the pushing thread.

Each setter works two ways::

    wurk.testing.fake()             # process-wide, until changed

    with wurk.testing.inline():     # this thread, this block only
        OrderJob.perform_async(1)   # runs right here

The block form wins over the process-wide mode, so a block inside a globally
fake suite is scoped properly; nesting two blocks raises
:class:`TestModeAlreadySetError`. The block's mode lives in a context variable:
it belongs to the thread that opened the block, and asyncio tasks started
inside the block inherit it, as do async jobs run inline.

Inline execution and draining go through :data:`server_middleware`, a separate
chain that starts empty, not the production server chain. There is no retry,
logging, stats or heartbeat on this path: exceptions propagate to the test.
"""

from __future__ import annotations

import contextvars
from collections.abc import Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any

from wurk import payload as wire
from wurk.errors import WurkError
from wurk.middleware import Chain
from wurk.testing.store import FakeJobs, Queues

if TYPE_CHECKING:
    from wurk.client import Client
    from wurk.config import Config

__all__ = [
    "MODES",
    "EmptyQueueError",
    "FakeJobs",
    "Queues",
    "TestModeAlreadySetError",
    "clear",
    "clear_all",
    "disable",
    "disabled",
    "drain",
    "drain_all",
    "enabled",
    "fake",
    "inline",
    "is_fake",
    "is_inline",
    "jobs",
    "mode",
    "perform_one",
    "process_job",
    "queues",
    "resolve",
    "server_middleware",
]

MODES = ("disable", "fake", "inline")

Payload = dict[str, Any]


class TestModeAlreadySetError(WurkError, RuntimeError):
    """A testing-mode block was opened inside another one on the same thread."""

    __test__ = False  # not a test class, whatever pytest's name patterns say


class EmptyQueueError(WurkError, LookupError):
    """``perform_one`` found no fake job for the class."""


#: The fake store.
queues = Queues()

#: The server chain used by inline execution and draining; empty by default.
server_middleware = Chain()

_global_mode = "disable"
_block_mode: contextvars.ContextVar[str | None] = contextvars.ContextVar("wurk_testing_mode", default=None)


# -- the mode ------------------------------------------------------------------


def mode() -> str:
    """The mode in force here: this block's, else the process-wide one."""
    return _block_mode.get() or _global_mode


def enabled() -> bool:
    """True in ``fake`` and ``inline`` mode."""
    return mode() != "disable"


def disabled() -> bool:
    return mode() == "disable"


def is_fake() -> bool:
    return mode() == "fake"


def is_inline() -> bool:
    return mode() == "inline"


def _set_global_mode(new_mode: str) -> str:
    """Set the process-wide mode; the previous one."""
    global _global_mode
    if new_mode not in MODES:
        raise ValueError(f"testing mode must be one of {', '.join(MODES)}, got {new_mode!r}")
    previous, _global_mode = _global_mode, new_mode
    return previous


class _ModeSetting:
    """Returned by the setters.

    A plain call must take effect at once, and nothing tells a call apart from
    the start of a ``with`` statement, so the process-wide switch happens here
    and entering the block undoes it in favour of a block-scoped one. (Another
    thread can therefore see the new mode for the instant between the two.)
    """

    def __init__(self, new_mode: str) -> None:
        self.mode = new_mode
        self._previous_global = _set_global_mode(new_mode)
        self._token: contextvars.Token[str | None] | None = None

    def __enter__(self) -> _ModeSetting:
        _set_global_mode(self._previous_global)
        current = _block_mode.get()
        if current is not None:
            raise TestModeAlreadySetError(
                f"testing mode {current!r} is already set for this block; "
                f"set the outer mode process-wide (wurk.testing.{current}()) and use one block inside it"
            )
        self._token = _block_mode.set(self.mode)
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        token, self._token = self._token, None
        try:
            if token is not None:
                _block_mode.reset(token)
        except ValueError:  # left from another context than it was entered in
            _block_mode.set(None)

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


# -- the client's hook --------------------------------------------------------------


def intercept(payloads: Sequence[Payload], client: Client) -> None:
    """Called by the client instead of writing to Redis when a mode is on.

    Each payload is stamped as a real push would be (``enqueued_at`` unless it
    is scheduled) and turned into exactly what a worker would read back.
    """
    now = wire.now_ms()
    current = mode()
    for payload in payloads:
        job = dict(payload)
        if job.get("at") is None:
            job.pop("at", None)
            job["enqueued_at"] = now
        else:
            job.pop("enqueued_at", None)
        job = _wire_copy(job)
        if current == "fake":
            queues.push(job["queue"], job["class"], job)
        else:
            run_inline(resolve(job["class"], client.config), job, server_middleware, client.config)


def _wire_copy(job: Payload) -> Payload:
    # The same encoding as the real write, so a payload Redis would refuse is
    # refused here too, and the job gets copies, not the caller's objects.
    return wire.loads(wire.dumps(job))  # type: ignore[no-any-return]


def _default_config() -> Config:
    from wurk.defaults import default_config

    return default_config()


# -- running a payload -------------------------------------------------------------


def run_inline(job_class: Any, job: Payload, chain: Chain, config: Config | None = None) -> Any:
    """Instantiate ``job_class`` for ``job`` and run it through ``chain``;
    ``perform``'s return value (``None`` when a middleware skipped it)."""
    config = config or (chain.config if chain.config is not None else _default_config())
    if chain.config is None:
        chain = chain.copy_for(config)  # so the middleware get a configuration
    job_class = _job_class(job_class)
    job = _wire_copy(job)
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


def process_job(job_class: Any, job: Payload) -> Any:
    """Run one payload through the testing server chain; ``perform``'s value."""
    return run_inline(job_class, job, server_middleware)


def _job_class(job_class: Any) -> Any:
    """The class behind a ``@wurk.job`` function; other classes unchanged."""
    from wurk.job import JobFunction

    return job_class.job_class if isinstance(job_class, JobFunction) else job_class


def _covers_all(job_class: Any) -> bool:
    """``None`` and ``wurk.Job`` itself mean every class."""
    from wurk.job import Job

    return job_class is None or job_class is Job


def resolve(name: str, config: Config | None = None) -> Any:
    """The job class a payload's ``class`` names.

    A class already defined in this process is preferred, which covers custom
    ``wire_name``s and jobs defined in a ``__main__`` script (importing the
    script again would run it twice); anything else goes through the
    configuration's registry.
    """
    defined = _defined_job_class(name)
    if defined is not None:
        return defined
    return (config or _default_config()).jobs.resolve(name)


def _defined_job_class(name: str) -> type | None:
    from wurk.job import Job

    found: type | None = None
    pending: list[type] = list(Job.__subclasses__())
    while pending:
        candidate = pending.pop(0)
        pending.extend(candidate.__subclasses__())
        try:
            if wire.class_name(candidate) == name:
                found = candidate  # the last one defined wins, as a re-definition would
        except wire.InvalidJobError:
            continue  # a class defined inside a function cannot be a job
    return found


# -- the fake store's helpers ------------------------------------------------------


def jobs(job_class: Any = None) -> FakeJobs:
    """The fake payloads of ``job_class`` in push order; of every class when
    it is ``None`` or ``wurk.Job``."""
    if _covers_all(job_class):
        return FakeJobs(queues.jobs())
    return FakeJobs(queues.jobs_for_class(_job_class(job_class)))


def clear(job_class: Any = None) -> None:
    """Drop the fake payloads of ``job_class`` (of every class for ``None``/``wurk.Job``)."""
    if _covers_all(job_class):
        queues.clear_all()
    else:
        queues.clear_class(_job_class(job_class))


def clear_all() -> None:
    """Empty the fake store."""
    queues.clear_all()


def drain(job_class: Any = None) -> int:
    """Run and remove every fake job of ``job_class``, including ones pushed
    while draining, oldest first; the number run. Scheduled jobs run too."""
    if _covers_all(job_class):
        return drain_all()
    job_class = _job_class(job_class)
    count = 0
    # take_first holds the store's lock only while it picks a payload.
    while (job := queues.take_first(job_class)) is not None:
        process_job(job_class, job)
        count += 1
    return count


def perform_one(job_class: Any = None) -> Any:
    """Run and remove the oldest fake job of ``job_class``; ``perform``'s value.

    Raises :class:`EmptyQueueError` when there is none.
    """
    everything = _covers_all(job_class)
    job = queues.take_any() if everything else queues.take_first(_job_class(job_class))
    if job is None:
        raise EmptyQueueError("no fake jobs" if everything else f"no fake jobs for {wire.class_name(job_class)}")
    return process_job(resolve(job["class"]) if everything else job_class, job)


def drain_all() -> int:
    """Run fake jobs of every class, oldest first, until the store is empty;
    the number run."""
    count = 0
    while (job := queues.take_any()) is not None:
        process_job(resolve(job["class"]), job)
        count += 1
    return count
