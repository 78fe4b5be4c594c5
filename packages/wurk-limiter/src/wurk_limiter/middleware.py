"""The server middleware: a job over its limit is rescheduled, not failed.

Registered after core's ``Expiry`` (inside an enclosing batch's middleware).
A limiter built without ``config=`` uses the configuration running the job
(``wurk.current_config()``). For an :class:`OverLimit`, or any class in the limiter settings' ``errors``,
it:

1. increments the job's ``overrated``;
2. re-raises when the limiter's ``reschedule`` is 0 (the normal retry path);
3. at the cap (``reschedule``, 20 by default) sends the job to the dead set
   with ``error_message`` ``rate_limited: …``, runs the death handlers and
   bumps the ``jobs.rate_limited`` statsd counter — the poison brake;
4. otherwise puts it back on the same queue after the backoff;

and in cases 3 and 4 raises :class:`Rescheduled`, so the run books nothing:
no retry, no failure, and a batch acks neither success nor failure. The
job log ends the run with what happened instead of ``done``: ``rescheduled
by limiter stripe in 312 s`` (case 4, which the worker counts in
``stat:rescheduled``, not in ``stat:processed``), or ``rate limited 20 times
by limiter stripe, moved to the dead set`` (case 3). A class from the
settings' ``errors`` is named in place of the limiter.
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable
from typing import Any

import wurk
from wurk.client import payload as wire
from wurk.client.middleware import ServerMiddleware
from wurk.plugins.outcomes import add_reason
from wurk.server.retry import Retrier, booked_payload, error_class_name, error_message
from wurk_limiter.errors import OverLimit, Rescheduled
from wurk_limiter.limiter import DEFAULT_RESCHEDULE, Limiter
from wurk_limiter.settings import LimiterConfig, limiter_config

#: The prefix of a rate-limited dead job's error message.
DEAD_PREFIX = "rate_limited:"

#: The outcome reason of a job the poison brake sent to the dead set,
#: registered here, beside the one call that gives it.
RATE_LIMITED = "rate_limited"
add_reason(RATE_LIMITED, "a rate limiter refused it as many times as its cap allows: the dead set")


def default_backoff(overrated: int) -> float:
    """Escalating five-minute steps with jitter: ``300 × overrated + rand(300) + 1``."""
    return 300 * overrated + random.randrange(300) + 1


def backoff_for(
    limiter: Limiter | None, settings: LimiterConfig, job: dict[str, Any], exc: BaseException, config: wurk.Config
) -> float:
    """The limiter's own backoff, else the settings', else the default."""
    chosen = limiter.options.get("backoff") if limiter is not None else None
    if chosen is None:
        chosen = settings.backoff
    if chosen is None:
        return default_backoff(int(job["overrated"]))
    if not callable(chosen):
        return float(chosen)
    try:
        return float(chosen(limiter, job, exc))
    except Exception as hook_exc:
        config.handle_exception(hook_exc, {"context": "limiter backoff raised; using the default", "job": job})
        return default_backoff(int(job["overrated"]))


class LimiterMiddleware(ServerMiddleware):
    """Turns a rate-limit error into a reschedule (or, at the cap, a death)."""

    stateless = True

    def call(self, job_instance: Any, job: dict[str, Any], queue: str, call_next: Callable[[], Any]) -> Any:
        config = self.wurk_config or wurk.current_config()
        settings = limiter_config(config)  # read at every job: runtime changes apply at once
        try:
            return call_next()
        except settings.catches() as exc:
            self._handle(config, settings, job, queue, exc)
            raise  # only reached for reschedule=0

    async def call_async(
        self, job_instance: Any, job: dict[str, Any], queue: str, call_next: Callable[[], Awaitable[Any]]
    ) -> Any:
        config = self.wurk_config or wurk.current_config()
        settings = limiter_config(config)
        try:
            return await call_next()
        except settings.catches() as exc:
            self._handle(config, settings, job, queue, exc)
            raise

    def _handle(
        self, config: wurk.Config, settings: LimiterConfig, job: dict[str, Any], queue: str, exc: BaseException
    ) -> None:
        limiter = exc.limiter if isinstance(exc, OverLimit) else None
        if isinstance(exc, OverLimit):
            exc.job = job
        payload = dict(booked_payload(job))  # what was enqueued, not what a middleware rewrote
        overrated = int(payload.get("overrated") or 0) + 1
        payload["overrated"] = job["overrated"] = overrated
        cap = limiter.reschedule if limiter is not None else DEFAULT_RESCHEDULE
        if cap == 0:
            return  # the caller re-raises: the normal retry rules apply
        retrier = Retrier(config)
        refused_by = f"limiter {limiter.name}" if limiter is not None else type(exc).__name__
        if overrated >= cap:
            payload["error_message"] = f"{DEAD_PREFIX} {error_message(exc)}"
            payload["error_class"] = error_class_name(exc)
            payload["failed_at"] = wire.now_ms()
            retrier.kill(payload, exc, reason=RATE_LIMITED)
            config.statsd_increment("jobs.rate_limited")
            raise Rescheduled(log_as=f"rate limited {overrated} times by {refused_by}, moved to the dead set") from exc
        delay = backoff_for(limiter, settings, payload, exc, config)
        retrier.reschedule(payload, delay, queue=queue)
        raise Rescheduled(log_as=f"rescheduled by {refused_by} in {seconds_text(delay)} s", rescheduled=True) from exc


def seconds_text(delay: float) -> str:
    """A backoff as the job log shows it: whole seconds as such, else to a tenth."""
    delay = max(0.0, float(delay))
    return str(int(delay)) if delay.is_integer() else f"{delay:.1f}"
