"""Testing modes: run or collect jobs in-process instead of writing to Redis.

Three modes, read by the client at the one place every push goes through
(``Client.raw_push``), after the client middleware has run. The client does
not import this package: switching a mode on installs the testing state in
:mod:`wurk.client.interception`, and importing this package registers its
helpers there (``MyJob.drain()``, ``MyJob.jobs``, ``perform_inline``):

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

All of this state lives in one :class:`~wurk.testing.harness.TestingState`,
:data:`state`; the functions here delegate to it. While the modes
are off nothing is installed, so the testing check on a push is one
attribute read.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from wurk.client import interception
from wurk.testing.harness import (
    MODES,
    EmptyQueueError,
    ModeSetting,
    TestingState,
    TestModeAlreadySetError,
)
from wurk.testing.running import resolve, run_inline
from wurk.testing.store import FakeJobs, Queues

if TYPE_CHECKING:
    from wurk.client.push import Client

__all__ = [
    "MODES",
    "EmptyQueueError",
    "FakeJobs",
    "Queues",
    "TestModeAlreadySetError",
    "TestingState",
    "clear",
    "clear_all",
    "disable",
    "disabled",
    "drain",
    "drain_all",
    "enabled",
    "fake",
    "inline",
    "intercept",
    "is_fake",
    "is_inline",
    "jobs",
    "mode",
    "perform_one",
    "process_job",
    "queues",
    "resolve",
    "run_inline",
    "server_middleware",
    "state",
]


#: The one testing state of the process.
state = TestingState()

#: The fake store (``state.queues``).
queues = state.queues

#: The server chain used by inline execution and draining; empty by default
#: (``state.server_middleware``).
server_middleware = state.server_middleware


# -- the mode ------------------------------------------------------------------


def mode() -> str:
    """The mode in force here: this block's, else the process-wide one."""
    return state.mode()


def enabled() -> bool:
    """True in ``fake`` and ``inline`` mode."""
    return state.enabled()


def disabled() -> bool:
    return state.mode() == "disable"


def is_fake() -> bool:
    return state.mode() == "fake"


def is_inline() -> bool:
    return state.mode() == "inline"


def fake() -> ModeSetting:
    """Collect pushed jobs in :data:`queues` (process-wide, or this block)."""
    return ModeSetting(state, "fake")


def inline() -> ModeSetting:
    """Run pushed jobs at once, in the pushing thread (process-wide, or this block)."""
    return ModeSetting(state, "inline")


def disable() -> ModeSetting:
    """Write pushed jobs to Redis, as in production (process-wide, or this block)."""
    return ModeSetting(state, "disable")


# -- the client's hook and the fake store's helpers ----------------------------------


def intercept(payloads: Sequence[Mapping[str, Any]], client: Client) -> None:
    """Called by the client instead of writing to Redis when a mode is on."""
    state.intercept(payloads, client)


def process_job(job_class: Any, job: Mapping[str, Any]) -> Any:
    """Run one payload through the testing server chain; ``perform``'s value."""
    return state.process_job(job_class, job)


def jobs(job_class: Any = None) -> FakeJobs:
    """The fake payloads of ``job_class`` in push order; of every class when
    it is ``None`` or ``wurk.Job``."""
    return state.jobs(job_class)


def clear(job_class: Any = None) -> None:
    """Drop the fake payloads of ``job_class`` (of every class for ``None``/``wurk.Job``)."""
    state.clear(job_class)


def clear_all() -> None:
    """Empty the fake store."""
    state.queues.clear_all()


def drain(job_class: Any = None) -> int:
    """Run and remove every fake job of ``job_class``, including ones pushed
    while draining, oldest first; the number run. Scheduled jobs run too."""
    return state.drain(job_class)


def perform_one(job_class: Any = None) -> Any:
    """Run and remove the oldest fake job of ``job_class``; ``perform``'s value.

    Raises :class:`EmptyQueueError` when there is none.
    """
    return state.perform_one(job_class)


def drain_all() -> int:
    """Run fake jobs of every class, oldest first, until the store is empty;
    the number run."""
    return state.drain_all()


# The client's job helpers call these functions through the slot the client
# keeps for them; registered once, here, because the client must not import us.
interception.helpers = cast("interception.TestingHelpers", sys.modules[__name__])
