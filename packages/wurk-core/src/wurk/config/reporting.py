"""The error handler every configuration starts with.

Kept apart from :mod:`wurk.config.configuration` because it is policy, not configuration:
what to log, at which level and with how much traceback, for each kind of
failure the components report through ``config.handle_exception``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from wurk.config import env
from wurk.config.tracebacks import job_traceback
from wurk.redis.connection import is_outage

if TYPE_CHECKING:
    from wurk.config.configuration import Config

#: The context the processor reports a failed job under.
JOB_FAILED = "Job raised exception"

#: The log record's attribute holding the traceback Wurk's formatters print
#: in place of the record's whole one (a failed job's, its frames folded).
TRACEBACK_ATTRIBUTE = "wurk_traceback"

_REDIS_ERROR_TYPES: tuple[type[BaseException], ...] = ()


def _redis_error_types() -> tuple[type[BaseException], ...]:
    # Imported on first report, not at import: redis-py is heavy to load for
    # a module every configuration imports.
    global _REDIS_ERROR_TYPES
    if not _REDIS_ERROR_TYPES:
        import redis.exceptions

        from wurk.errors import RedisConnectionError

        _REDIS_ERROR_TYPES = (redis.exceptions.RedisError, RedisConnectionError)
    return _REDIS_ERROR_TYPES


def _summary(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def default_error_handler(exc: BaseException, context: dict[str, Any], config: Config) -> None:
    """Log what went wrong, in proportion.

    A failed job is a WARNING naming the job, with the traceback in
    development, where the person reading the log is the one who wrote the
    job: the job's own frames, Wurk's processor and middleware folded into
    one line (:mod:`wurk.config.tracebacks`) unless ``WURK_DEBUG`` is set or
    the logger is at DEBUG. The record still carries the exception, for a
    handler of the application's own. Redis being unreachable goes to the outage log, which says so once
    rather than once a second from every thread. Anything else is one line
    (Redis errors as warnings, the rest informational), with the traceback
    when ``WURK_DEBUG`` is set or the logger is at DEBUG.
    """
    logger = config.logger
    verbose = env.debug() or logger.isEnabledFor(logging.DEBUG)
    job = context.get("job")
    if context.get("context") == JOB_FAILED and isinstance(job, Mapping):
        development = (config.option("environment") or env.environment()) == "development"
        name = job.get("wrapped") or job.get("class")
        traceback = exc if development or verbose else None
        # Wurk's formatters print this instead of the whole traceback.
        shown = {TRACEBACK_ATTRIBUTE: job_traceback(exc)} if development and not verbose else None
        logger.warning("%s jid=%s failed: %s", name, job.get("jid"), _summary(exc), exc_info=traceback, extra=shown)
        return
    if is_outage(exc):
        config.outage_log.error(exc, str(context.get("context") or type(exc).__name__))
        return
    level = logging.WARNING if isinstance(exc, _redis_error_types()) else logging.INFO
    ctx = " ".join(f"{key}={_clip(value)}" for key, value in context.items() if key != "job")
    logger.log(level, "%s%s", _summary(exc), f" ({ctx})" if ctx else "", exc_info=exc if verbose else None)


#: Characters of one context value in a log line: a payload of several
#: megabytes (``jobstr``) must not become a log line of several megabytes.
MAX_CONTEXT_CHARS = 1000


def _clip(value: Any) -> str:
    text = str(value)
    if len(text) <= MAX_CONTEXT_CHARS:
        return text
    return f"{text[:MAX_CONTEXT_CHARS]}... ({len(text)} characters)"
