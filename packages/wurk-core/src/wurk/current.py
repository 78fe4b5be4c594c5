"""Which configuration runs the code in this context.

A process may run more than one :class:`~wurk.config.Config`: an embedded
worker beside the application's own, two applications, a test's worker next
to the process default. Code on a worker's path must therefore never reach
for the process default (:func:`wurk.default_config`): it would read and
write another Redis than the worker it runs in. Instead, the worker marks
each thread it runs code in with its configuration and capsule:

* a processor thread, for every job it runs (and an ``async def perform``'s
  task, which does not inherit the thread's context);
* a component's thread (the scheduler, the cron poller, plugins' threads);
* the lifecycle events (``startup``, ``quiet``, ``shutdown``…) and their hooks;
* an in-process run (``perform_inline``, the testing modes' ``drain``).

:func:`wurk.current_config` reads the mark, and outside any of those (the
application's own code) answers the process default, as documented for the
client. This module is a leaf: it imports nothing from Wurk at run time, so
anything may import it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from wurk.capsule import Capsule
    from wurk.config import Config

#: The configuration running the code in this context; unset outside a worker.
running_config: ContextVar[Config | None] = ContextVar("wurk_running_config", default=None)
#: The capsule whose processor runs the job in this context; unset outside a
#: processor thread (components and lifecycle events belong to no capsule).
running_capsule: ContextVar[Capsule | None] = ContextVar("wurk_running_capsule", default=None)


def mark(config: Config, capsule: Capsule | None = None) -> None:
    """Mark this thread (this context) as run by ``config`` for good: a
    thread Wurk starts for one configuration calls it once, first."""
    running_config.set(config)
    running_capsule.set(capsule)


@contextmanager
def running(config: Config, capsule: Capsule | None = None) -> Iterator[None]:
    """Run the block as ``config`` (and ``capsule``), then restore what was
    marked before: for code run on behalf of a configuration in a thread that
    is not its own (an inline run, a lifecycle event fired by the host)."""
    config_token = running_config.set(config)
    capsule_token = running_capsule.set(capsule)
    try:
        yield
    finally:
        running_capsule.reset(capsule_token)
        running_config.reset(config_token)


__all__ = ["mark", "running", "running_capsule", "running_config"]
