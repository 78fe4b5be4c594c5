"""Which configuration runs the code in this context.

A process may run more than one :class:`~wurk.config.configuration.Config`: an embedded
worker beside the application's own, two applications, a test's worker next
to the process default. Code on a worker's path must therefore never reach
for the process default (:func:`wurk.default_config`): it would read and
write another Redis than the worker it runs in. Instead, the worker marks
each thread it runs code in with its configuration and capsule:

* a processor thread, for every job it runs (an ``async def perform``'s
  task runs in a copy of that thread's context, so it sees the marks too);
* a component's thread (the scheduler, the cron poller, plugins' threads);
* the lifecycle events (``startup``, ``quiet``, ``shutdown``…) and their hooks;
* an in-process run (``perform_inline``, the testing modes' ``drain``).

:func:`wurk.current_config` reads the mark, and outside any of those (the
application's own code) answers the process default, as documented for the
client. The job running in this context is marked here too (the payload
as fetched, its private list, whether its processor is stopping), for the
server middleware and the retry layer alike. This module is a leaf: it imports nothing from Wurk at run time, so
anything may import it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from wurk.config.capsule import Capsule
    from wurk.config.configuration import Config
    from wurk.redis.connection import RedisPool

#: The configuration running the code in this context; unset outside a worker.
running_config: ContextVar[Config | None] = ContextVar("wurk_running_config", default=None)
#: The capsule whose processor runs the job in this context; unset outside a
#: processor thread (components and lifecycle events belong to no capsule).
running_capsule: ContextVar[Capsule | None] = ContextVar("wurk_running_capsule", default=None)

#: Where a configuration's Redis traffic goes in this context instead of its
#: main pool: ``wurk.via("east")`` sets it (:mod:`wurk.config.shards`), and
#: ``config.redis_pool`` answers it for that configuration alone.
routed_pool: ContextVar[tuple[Config, RedisPool] | None] = ContextVar("wurk_routed_pool", default=None)

# The job running in this context, set by the processor (and by an inline
# run) and read by the server middleware, the retry layer and plugins.

#: The job JSON exactly as fetched, for the job running in this context.
current_jobstr: ContextVar[str | None] = ContextVar("wurk_current_jobstr", default=None)
#: The private list holding that job while it runs (reliable fetch).
current_private: ContextVar[str | None] = ContextVar("wurk_current_private", default=None)
#: The payload of the job running in this context, in a worker and inline
#: alike: core puts only ``jid`` on a job instance, so a plugin's mixin reads
#: the other fields it owns from here.
current_job: ContextVar[dict[str, Any] | None] = ContextVar("wurk_current_job", default=None)
#: Whether the processor running the job in this context is stopping (quiet,
#: or a shutdown under way): a long job polls it to give its work back at a
#: safe point instead of being cut off at the deadline. Unset (inline runs,
#: tests) it reads as never stopping.
current_stopping: ContextVar[Callable[[], bool] | None] = ContextVar("wurk_current_stopping", default=None)


def stopping() -> bool:
    """True once the processor running this job has been told to stop."""
    poll = current_stopping.get()
    return poll is not None and poll()


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


__all__ = [
    "current_job",
    "current_jobstr",
    "current_private",
    "current_stopping",
    "mark",
    "routed_pool",
    "running",
    "running_capsule",
    "running_config",
    "stopping",
]
