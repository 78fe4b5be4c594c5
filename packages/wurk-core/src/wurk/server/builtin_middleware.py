"""Core's built-in server middleware, registered by the ``core`` plugin.

* :class:`InterruptHandler`, outermost: a job that raises
  :class:`~wurk.errors.Interrupted` goes back, byte for byte as it was
  fetched, to the end of its queue that the next fetch takes from, and the
  processor acknowledges the old copy without booking a retry; the job log
  ends the run with ``interrupted at cursor 41, requeued`` (an iterable
  job) or ``interrupted, requeued``. It must stay outermost, so no other
  middleware swallows the interruption.
* :class:`Expiry`: a job whose ``expiry`` (stamped from ``expires_in`` at push
  time) has passed is dropped before ``perform``. It still counts as
  processed, and also as expired (``stat:expired``, statsd ``jobs.expired``),
  and its outcome is ``died`` for the reason ``expired``.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

from wurk.client.middleware import ServerMiddleware
from wurk.current import current_job, current_jobstr, current_private, current_stopping, stopping
from wurk.errors import Interrupted
from wurk.plugins import outcomes
from wurk.plugins.outcomes import Outcome
from wurk.redis import keys
from wurk.server.interrupts import booking
from wurk.server.retry import Skip, booked_payload

# The job's context variables (current_job and the others) and ``stopping``
# live in the leaf wurk.current, which the retry layer and the job class read
# too; they stay importable from here, where plugins and the testing modes
# import them.


def requeued(stop: Interrupted) -> str:
    """The job log's line for a run given back to its queue: it did not end
    ``done``, and an iterable job's line says where it will resume."""
    if stop.cursor is None:
        return "interrupted, requeued"
    return f"interrupted at cursor {stop.cursor}, requeued"


class InterruptHandler(ServerMiddleware):
    stateless = True

    def call(self, job_instance: Any, job: dict[str, Any], queue: str, call_next: Callable[[], Any]) -> Any:
        try:
            return call_next()
        except Interrupted as stop:
            if not self._gave_back(queue):
                raise
            raise Skip(log_as=requeued(stop)) from None

    async def call_async(
        self, job_instance: Any, job: dict[str, Any], queue: str, call_next: Callable[[], Awaitable[Any]]
    ) -> Any:
        try:
            return await call_next()
        except Interrupted as stop:
            if not self._gave_back(queue):
                raise
            raise Skip(log_as=requeued(stop)) from None

    def _gave_back(self, queue: str) -> bool:
        """The job said it was interrupted (a stopping iterable job): back to
        its queue, and then a ``Skip`` acknowledges it here. Whether it could
        be (not outside a worker)."""
        jobstr = current_jobstr.get()
        private = current_private.get()
        owner = self.config
        if jobstr is None or private is None or owner is None:
            return False
        # A guarded move (pushed only if still in the private list), not a
        # plain RPUSH: sent again after a lost reply, it moves nothing more.
        script_keys = [private, keys.queue(queue)]
        booking()  # its way back and the acknowledgement are not cut apart by a shutdown
        owner.redis_pool.execute(lambda conn: owner.scripts.call("core.requeue", conn, script_keys, [jobstr]))
        return True


async def _nothing() -> None:
    """What an expired job's chain gives back to await: no result."""


class Expiry(ServerMiddleware):
    stateless = True

    def call(self, job_instance: Any, job: dict[str, Any], queue: str, call_next: Callable[[], Any]) -> Any:
        expiry = job.get("expiry")
        if expiry is None or time.time() <= float(expiry):
            return call_next()
        self._expire(job, queue, expiry)
        return None  # the job does not run

    def call_async(
        self, job_instance: Any, job: dict[str, Any], queue: str, call_next: Callable[[], Awaitable[Any]]
    ) -> Awaitable[Any]:
        # The rest of the chain's awaitable, handed back rather than awaited
        # here: a job with no expiry, nearly every one, then passes through
        # no coroutine of this middleware (see Chain.invoke_async).
        expiry = job.get("expiry")
        if expiry is None or time.time() <= float(expiry):
            return call_next()
        self._expire(job, queue, expiry)
        return _nothing()  # the job does not run

    def _expire(self, job: dict[str, Any], queue: str, expiry: Any) -> None:
        config = self.wurk_config
        if config is not None:
            stats = config.lookup("process_stats")
            if stats is not None:
                stats.count_expired()
            config.statsd_increment("jobs.expired")
        self.logger.info("expired: %s was due to run before %s", job.get("jid"), expiry)
        if config is not None:
            # Told here, where it is known; the processor then tells no success.
            outcomes.report(config, Outcome.of("died", booked_payload(job), queue=queue, reason="expired"))


__all__ = ["Expiry", "InterruptHandler", "current_job", "current_jobstr", "current_stopping", "stopping"]
