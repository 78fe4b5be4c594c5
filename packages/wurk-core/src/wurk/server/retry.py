"""What happens when a job raises: retries, backoff, the dead set, death handlers.

Two guards wrap every job. The *global* guard is outermost and needs no job
instance, so it also catches a class that cannot be found; the *local* guard
runs once the instance exists, so the class's ``retry_in`` and
``retries_exhausted`` hooks can take part. Either way the failure is booked —
a retry scheduled, the job killed into the dead set, or discarded — and then
:class:`Handled` tells the processor to acknowledge the job. A
:class:`~wurk.errors.Shutdown` (or any exception caused by one) is never
booked: it propagates and the job stays in the private list.

A booking is a critical section (:func:`wurk.server.interrupts.booking`): a
shutdown's interrupt that arrives once it started waits until the processor
has acknowledged the job, so a job is never both booked and given back.

A failure is booked from the payload *as fetched* (Sidekiq books its
``jobstr``), not from the job dict the server middleware saw: a middleware
that decrypts or rewrites arguments changes them for ``perform`` only, and the
``retry`` and ``dead`` sets, ``retries_exhausted`` and the death handlers get
what was enqueued. Only ``retry`` is filled in from the class's options when
the payload has none, as before.

Every booking is told to plugins as a :class:`~wurk.plugins.outcomes.Outcome`
(``retry_scheduled`` or ``died``, with its reason) once it is done, death
handlers included. Code outside the retry layer books through
:class:`Retrier` — the dead set or the schedule, by the same rules — and
raises :class:`Skip` so that the processor acknowledges the job without
booking anything more.

The payload fields, their order and units, the backoff formula and the dead
set's trims are Sidekiq 8's, so a Ruby process and the Sidekiq Web UI read
these entries as their own.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, NoReturn

from wurk.client import fields
from wurk.client import payload as wire
from wurk.current import current_jobstr
from wurk.errors import Shutdown
from wurk.plugins import outcomes
from wurk.plugins.outcomes import Outcome, Reason
from wurk.redis import keys
from wurk.server.failure import (
    MAX_MESSAGE_CHARS,
    backtrace_lines,
    compress_backtrace,
    decompress_backtrace,
    error_class_name,
    error_message,
)
from wurk.server.interrupts import booking

if TYPE_CHECKING:
    from wurk.client.job import Job
    from wurk.config.configuration import Config

DEFAULT_MAX_RETRIES = 25
KILLED_BY_API = "Job killed by API"


# Why the job whose death handlers are running died. Death handlers keep
# Sidekiq's ``(job, exc)`` signature, so the reason travels beside the call.
_dying: ContextVar[Reason | None] = ContextVar("wurk_death_reason", default=None)


def death_reason() -> Reason | None:
    """Inside a death handler, why the job died: an :data:`~wurk.plugins.outcomes.Reason`
    (``retries_exhausted``, ``retry_false``, ``discarded``, ``killed`` …), or
    ``None`` outside one.

    A handler that must tell an automatic death from a person's kill asks
    here (a unique-jobs lock is released on the first, kept on the second)::

        def release(job, exc):
            if wurk.server.retry.death_reason() != "killed":
                ...
    """
    return _dying.get()


class Handled(Exception):
    """The failure is booked (or the job handled itself): acknowledge it."""


class Skip(Handled):
    """A middleware took care of the job itself: acknowledge it without booking
    anything, and count the run as neither a success nor a failure.

    Public, and Sidekiq's name (``JobRetry::Skip``): a server middleware that
    re-enqueued the job, or booked it through :class:`Retrier` (a rate
    limiter's reschedule), raises it::

        Retrier(self.config).reschedule(job, 300)
        raise Skip()

    No outcome is told for a skipped run unless its middleware told one
    (the Retrier does), except for an ``Interrupted`` job given back to its
    queue, which is ``interrupted``.

    The job log would otherwise end such a run with ``done``, which is not
    what happened; ``log_as`` is what it says instead (``"interrupted at
    cursor 41, requeued"``). A run that only put the job back to run later
    (``rescheduled=True``) did not finish, so it is counted in the worker's
    ``rescheduled`` counter (``stat:rescheduled``) rather than in
    ``processed``::

        Retrier(self.config).reschedule(job, 300)
        raise Skip(log_as="rescheduled by the quota guard in 300 s", rescheduled=True)
    """

    def __init__(self, *args: object, log_as: str = "done", rescheduled: bool = False) -> None:
        super().__init__(*args)
        self.log_as = log_as
        self.rescheduled = rescheduled


def retries_enabled(value: Any) -> bool:
    """``retry: 0`` still books (straight to the dead set); only false and
    missing mean no retry, as in Ruby, where 0 is true."""
    return value is not None and value is not False


def caused_by_shutdown(exc: BaseException, depth: int = 0) -> bool:
    """True when ``exc`` is a shutdown or was raised while handling one."""
    if isinstance(exc, Shutdown):
        return True
    if depth > 10:
        return False
    cause = exc.__cause__ or exc.__context__
    return cause is not None and caused_by_shutdown(cause, depth + 1)


def shutdown_of_task(exc: BaseException) -> BaseException:
    """``exc`` as the retry layer should see it in a job on the event loop: a
    cancellation of the running task is the shutdown giving the job back (a
    ``Shutdown``); a ``CancelledError`` the job's own code let out, with no
    cancellation asked for, is the job's failure like any other error."""
    if isinstance(exc, asyncio.CancelledError):
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            shutdown = Shutdown()
            shutdown.__cause__ = exc
            return shutdown
    return exc


def default_delay(count: int) -> float:
    return count**4 + 15


def jitter(count: int) -> int:
    # Ruby's rand(n) takes a negative n as its absolute value: a count below
    # -1 (a job retried by hand more often than it failed) still gets one.
    return random.randrange(10 * abs(count + 1) or 1)


def booked_payload(job: dict[str, Any]) -> dict[str, Any]:
    """A fresh parse of the job's payload as fetched, which is what a failure
    books; ``job`` itself when there is none (a direct call, not a worker's).

    The fetched JSON is the processor's ``current_jobstr``. Its jid must match
    ``job``'s: the variable keeps the last job a thread ran, and a failure
    booked outside that job must not pick it up.
    """
    jobstr = current_jobstr.get()
    if jobstr is None:
        return job
    try:
        fetched = fields.loads_strict(jobstr)
    except ValueError:
        return job
    if not isinstance(fetched, dict) or fetched.get("jid") != job.get("jid"):
        return job
    return fetched


def morgue(config: Config, conn: Any, jobstr: str | bytes, now: float | None = None) -> None:
    """Add a job to the dead set and trim it by age and by size, in one MULTI."""
    now = time.time() if now is None else now
    pipe = conn.pipeline(transaction=True)
    pipe.zadd(keys.DEAD, {jobstr: now})
    pipe.zremrangebyscore(keys.DEAD, "-inf", now - int(config["dead_timeout_in_seconds"]))
    pipe.zremrangebyrank(keys.DEAD, 0, -int(config["dead_max_jobs"]))
    pipe.execute()


class JobRetry:
    """Books failures for one capsule's processors."""

    def __init__(self, config: Config, resolve: Callable[[str], type] | None = None) -> None:
        self.config = config
        self.resolve = resolve or config.jobs.resolve
        # Asked once: a worker builds its retrier at start, and a job's
        # outcome must cost nothing when no plugin listens.
        self.listening = outcomes.listening(config)

    def tell(
        self,
        kind: outcomes.Kind,
        job: dict[str, Any],
        exc: BaseException | None = None,
        reason: Reason | None = None,
        queue: str | None = None,
    ) -> None:
        """Tell the listening plugins how a job ended (nothing when none listens)."""
        if self.listening:
            outcome = Outcome.of(kind, job, queue=queue, reason=reason, exception=exc)
            outcomes.report(self.config, outcome, known_listening=True)

    # -- the guards ---------------------------------------------------------------

    def run_global(self, job: dict[str, Any], queue: str, body: Callable[[], Any]) -> Any:
        try:
            return body()
        except (Handled, Shutdown):
            raise
        except BaseException as exc:
            self._book_global(job, queue, exc)

    def run_local(self, job_class: type[Job], job: dict[str, Any], queue: str, body: Callable[[], Any]) -> Any:
        try:
            return body()
        except (Handled, Shutdown):
            raise
        except BaseException as exc:
            self._book_local(job_class, job, queue, exc)

    async def run_global_async(self, job: dict[str, Any], queue: str, body: Callable[[], Awaitable[Any]]) -> Any:
        """:meth:`run_global` for a job on the event loop, where a shutdown
        arrives as the task's cancellation."""
        try:
            return await body()
        except (Handled, Shutdown):
            raise
        except BaseException as exc:
            self._book_global(job, queue, shutdown_of_task(exc))

    async def run_local_async(
        self, job_class: type[Job], job: dict[str, Any], queue: str, body: Callable[[], Awaitable[Any]]
    ) -> Any:
        try:
            return await body()
        except (Handled, Shutdown):
            raise
        except BaseException as exc:
            self._book_local(job_class, job, queue, shutdown_of_task(exc))

    # Called from the ``except`` clauses above: each raises, a bare ``raise``
    # re-raising the job's own error with its traceback.

    def _book_global(self, job: dict[str, Any], queue: str, exc: BaseException) -> NoReturn:
        if caused_by_shutdown(exc):
            raise Shutdown() from exc
        booking()
        payload = booked_payload(job)
        if retries_enabled(payload.get("retry")):
            self.process_retry(None, payload, queue, exc)
        else:
            self.run_death_handlers(payload, exc, "retry_false")
            self.tell("died", payload, exc, "retry_false", queue)
        raise Handled() from exc

    def _book_local(self, job_class: type[Job], job: dict[str, Any], queue: str, exc: BaseException) -> NoReturn:
        if caused_by_shutdown(exc):
            raise Shutdown() from exc
        booking()
        payload = booked_payload(job)
        if payload.get("retry") is None:
            payload["retry"] = job_class.get_options(self.config).get("retry", True)
        if not retries_enabled(payload["retry"]):
            raise exc  # the global guard runs the death handlers
        self.process_retry(job_class, payload, queue, exc)
        raise Handled() from exc

    # -- booking ------------------------------------------------------------------------

    def process_retry(self, job_class: type | None, job: dict[str, Any], queue: str, exc: BaseException) -> None:
        if job_class is None:
            job_class = self._try_resolve(job.get("class"))
        retry = job.get("retry")
        max_attempts = retry if type(retry) is int else int(self.config.option("max_retries", DEFAULT_MAX_RETRIES))
        job["queue"] = job.get("retry_queue") or queue
        job["error_message"] = error_message(exc)
        job["error_class"] = error_class_name(exc)
        now_ms = wire.now_ms()
        if "retry_count" in job:
            job["retried_at"] = now_ms
            job["retry_count"] = int(job["retry_count"]) + 1
        else:
            job["failed_at"] = now_ms
            job["retry_count"] = 0
        self._stamp_backtrace(job, exc)
        count = job["retry_count"]
        if self._exhausted(job, count, max_attempts):
            self.retries_exhausted(job_class, job, exc)
            return
        action, delay = self._delay_for(job_class, count, exc, job)
        if action == "discard":
            job["discarded_at"] = wire.now_ms()
            self.run_death_handlers(job, exc, "discarded")
            self.tell("died", job, exc, "discarded")
            return
        if action == "kill":
            self.retries_exhausted(job_class, job, exc)
            return
        score = time.time() + delay + jitter(count)
        member = wire.dumps(job)
        self.config.redis_pool.execute(lambda conn: conn.zadd(keys.RETRY, {member: score}))
        self.config.statsd_increment("jobs.retried")
        self.tell("retry_scheduled", job, exc)

    def _stamp_backtrace(self, job: dict[str, Any], exc: BaseException) -> None:
        wanted = job.get("backtrace")
        if not wanted:
            return
        lines = self.config["backtrace_cleaner"](backtrace_lines(exc))
        if type(wanted) is int:
            lines = lines[:wanted]
        job["error_backtrace"] = compress_backtrace(list(lines))

    @staticmethod
    def _exhausted(job: dict[str, Any], count: int, max_attempts: int) -> bool:
        retry_for = job.get("retry_for")
        if retry_for is not None:
            failed_at = job.get("failed_at", wire.now_ms())
            failed_at_s = failed_at / 1000.0 if isinstance(failed_at, int) else float(failed_at)
            return failed_at_s + float(retry_for) < time.time()
        return count >= max_attempts

    def _delay_for(
        self, job_class: type | None, count: int, exc: BaseException, job: dict[str, Any]
    ) -> tuple[str | None, float]:
        hook = getattr(job_class, "retry_in", None)
        if hook is None:
            return None, default_delay(count)
        try:
            answer = hook(count, exc, job)
        except Exception as hook_exc:
            self.config.handle_exception(hook_exc, {"context": "Failure scheduling retry via retry_in", "job": job})
            return None, default_delay(count)
        if answer in ("discard", "kill"):
            return str(answer), 0.0
        if isinstance(answer, int | float) and not isinstance(answer, bool) and int(answer) > 0:
            return None, float(int(answer))
        return None, default_delay(count)

    def retries_exhausted(self, job_class: type | None, job: dict[str, Any], exc: BaseException) -> None:
        discard = False
        hook = getattr(job_class, "retries_exhausted", None)
        if hook is not None:
            try:
                discard = hook(job, exc) == "discard"
            except Exception as hook_exc:
                self.config.handle_exception(hook_exc, {"context": "Error calling retries_exhausted", "job": job})
        reason: Reason = "retries_exhausted"
        if discard or job.get("dead") is False:
            job["discarded_at"] = wire.now_ms()
            reason = "discarded"
        else:
            member = wire.dumps(job)
            self.config.redis_pool.execute(lambda conn: morgue(self.config, conn, member))
        self.run_death_handlers(job, exc, reason)
        self.tell("died", job, exc, reason)

    def run_death_handlers(self, job: dict[str, Any], exc: BaseException, reason: Reason | None = None) -> None:
        """Call every death handler with ``(job, exc)``; :func:`death_reason`
        answers ``reason`` meanwhile."""
        token = _dying.set(reason)
        try:
            for handler in list(self.config.death_handlers):
                try:
                    handler(job, exc)
                except Exception as handler_exc:
                    self.config.handle_exception(handler_exc, {"context": "Error calling death handler", "job": job})
        finally:
            _dying.reset(token)

    def kill_raw(self, jobstr: str | bytes) -> None:
        """A payload nobody can parse goes to the dead set as it is."""
        booking()
        self.config.redis_pool.execute(lambda conn: morgue(self.config, conn, jobstr))

    def kill_unreadable(self, jobstr: str | bytes, exc: fields.UnreadableJobError) -> None:
        """Put a payload no worker can run in the dead set: byte for byte
        when it is not a JSON object with a ``class`` and ``args``; else, as a
        Sidekiq dead entry, the object with ``error_class``, ``error_message``
        and ``failed_at`` saying why (the dashboard shows the reason where it
        shows every dead job's). Death handlers are not run: they would be
        handed a payload without the fields they rely on."""
        booking()
        member: str | bytes = jobstr
        if exc.job is not None:
            entry = {
                **exc.job,
                "error_message": error_message(exc),
                "error_class": error_class_name(exc),
                "failed_at": wire.now_ms(),
            }
            try:
                member = wire.dumps_any(entry)
            except (ValueError, RecursionError):
                member = jobstr
        self.config.redis_pool.execute(lambda conn: morgue(self.config, conn, member))

    def _try_resolve(self, name: Any) -> type | None:
        if not isinstance(name, str):
            return None
        try:
            return self.resolve(name)
        except Exception:
            return None


class Retrier:
    """Core's booking rules for code outside the retry layer: a plugin's
    middleware (a rate limiter, a unique-jobs lock), a tool, a test.

    Each call books like the retry layer does and then tells the outcome to
    the listening plugins. Inside a server middleware, follow it with
    ``raise Skip()`` so that the processor acknowledges the job and books
    nothing more. Pass the payload you want booked: to book it as enqueued
    rather than as a middleware rewrote it, pass a copy of the original.
    """

    def __init__(self, config: Config | Any) -> None:
        # A server middleware's ``self.config`` is its capsule, which holds
        # the configuration: accept either, so ``Retrier(self.config)`` works.
        self.config: Config = getattr(config, "config", None) or config
        self._retry = JobRetry(self.config)

    def kill(self, job: dict[str, Any], exc: BaseException | None = None, *, reason: Reason = "killed") -> None:
        """Put ``job`` in the dead set now (trimmed by age and size, as always),
        run the death handlers with ``exc`` (a ``RuntimeError`` naming the
        reason when there is none), and tell the outcome ``died``. ``reason``
        must be registered (:func:`wurk.plugins.outcomes.add_reason`): an unknown one
        is refused before anything is booked."""
        outcomes.check_reason(reason)
        error = exc if exc is not None else _raised(f"Job killed: {reason}")
        member = wire.dumps(job)
        booking()
        self.config.redis_pool.execute(lambda conn: morgue(self.config, conn, member))
        self._retry.run_death_handlers(job, error, reason)
        self._retry.tell("died", job, error, reason)

    def reschedule(self, job: dict[str, Any], delay: float, queue: str | None = None) -> None:
        """Put ``job`` in the ``schedule`` set to run ``delay`` seconds from now
        (on ``queue`` if given), booking no failure, and tell the outcome
        ``rescheduled``. The payload keeps its jid and every other field."""
        payload = {key: value for key, value in job.items() if key not in ("at", "enqueued_at")}
        if queue is not None:
            payload["queue"] = queue
        member = wire.dumps(payload)
        score = time.time() + max(0.0, float(delay))
        booking()
        self.config.redis_pool.execute(lambda conn: conn.zadd(keys.SCHEDULE, {member: score}))
        self._retry.tell("rescheduled", payload)


def _raised(message: str) -> RuntimeError:
    """A RuntimeError with a traceback, as the death handlers' real errors have."""
    try:
        raise RuntimeError(message)
    except RuntimeError as exc:
        return exc


__all__ = [
    "KILLED_BY_API",
    "MAX_MESSAGE_CHARS",
    "Handled",
    "JobRetry",
    "Retrier",
    "Skip",
    "backtrace_lines",
    "booked_payload",
    "caused_by_shutdown",
    "compress_backtrace",
    "death_reason",
    "decompress_backtrace",
    "error_class_name",
    "error_message",
    "retries_enabled",
    "shutdown_of_task",
]
