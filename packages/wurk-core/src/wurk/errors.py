"""Exceptions raised by Wurk core; every one derives from :class:`WurkError`."""

from __future__ import annotations

from typing import Any


class WurkError(Exception):
    """Base class of every error Wurk raises on purpose."""


class ConfigurationError(WurkError, ValueError):
    """A configuration value, file or flag is invalid."""


class UnknownOptionError(ConfigurationError):
    """A job option belongs to a feature plugin that is not active."""


class PluginError(WurkError):
    """A plugin could not be loaded or failed validation."""


class RedisConnectionError(WurkError, ConnectionError):
    """Redis could not be reached after the transient-failure retries.

    The message is one line that names the server URL (with any password
    masked) and what to do about it, so that a server that is not running, or
    a misconfigured ``REDIS_URL``, is obvious from the first line of the log
    or of a command's output.
    """

    #: A fenced write that gave up with this error and may have been applied
    #: (a ``wurk.redis.fence.Unsettled``), for whoever writes it again later.
    unsettled: Any = None

    def __init__(self, url: str, cause: BaseException) -> None:
        self.url = url
        self.reason = connection_failure(cause)
        super().__init__(
            f"cannot reach Redis at {url} ({self.reason}). Start one with `wurk server`, or set REDIS_URL."
        )


class LostReplyError(RedisConnectionError):
    """A write reached Redis, or may have, and its reply never came back.

    Raised instead of re-sending a write that is not safe to apply twice:
    after a connection dropped between the command and its reply (a
    failover, a NAT timeout, a proxy restart), nobody can tell whether the
    server applied it. The caller decides what that means for its write and
    says so in the log; ``docs/reliability.md`` lists each write's answer.
    """

    def __init__(self, url: str, cause: BaseException) -> None:
        super().__init__(url, cause)
        self.args = (f"lost the reply from Redis at {url} ({self.reason}): the write may or may not have been applied",)


class NotReplicatedError(WurkError):
    """A durable push (the ``durable_push`` setting) reached the primary, but
    fewer replicas than asked confirmed it within the timeout.

    The jobs are in Redis and will run unless the primary fails before it
    replicates them; they were not pushed again, since that could run them
    twice. ``jids`` names them, ``replicas`` says how many replicas confirmed
    and ``wanted`` how many were asked for.
    """

    def __init__(self, url: str, jids: list[str], replicas: int, wanted: int, timeout_ms: int) -> None:
        self.url = url
        self.jids = jids
        self.replicas = replicas
        self.wanted = wanted
        shown = ", ".join(jids[:3]) + (f" and {len(jids) - 3} more" if len(jids) > 3 else "")
        super().__init__(
            f"durable push of job {shown} to {url}: {replicas} of {wanted} replica(s) confirmed it within "
            f"{timeout_ms} ms. The job is on the primary and runs unless the primary fails before replicating "
            "it; it was not pushed again (that could run it twice)."
        )


def connection_failure(cause: BaseException) -> str:
    """A few words for why a connection failed, from the socket error under it.

    redis-py wraps the socket's ``OSError`` in its own ``ConnectionError``
    (keeping the original as ``__context__``) with a message such as "Error
    111 connecting to 127.0.0.1:6379. Connection refused."; the user needs the
    last words, not the errno.
    """
    import socket

    seen: set[int] = set()
    error: BaseException | None = cause
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if type(error).__name__ == "MasterNotFoundError":
            return _no_primary(str(error))
        if isinstance(error, ConnectionRefusedError):
            return "connection refused"
        if isinstance(error, socket.gaierror):
            return "unknown host"
        if isinstance(error, TimeoutError):
            return "timed out"
        error = error.__cause__ or error.__context__
    text = str(cause).strip().rstrip(".")
    lowered = text.lower()
    for words, reason in (("connection refused", "connection refused"), ("timeout", "timed out")):
        if words in lowered:
            return reason
    return text or type(cause).__name__


def _no_primary(text: str) -> str:
    """Why no sentinel named a primary, from redis-py's ``MasterNotFoundError``,
    whose message holds each sentinel's whole connection ``repr`` (and, in
    it, words such as ``socket_timeout`` that would read as a cause)."""
    import re

    found = re.search(r"No master found for ('[^']*')", text)
    service = found.group(1) if found else "the service"
    lowered = text.lower()
    if "authenticationerror" in lowered or "invalid username-password" in lowered or "noauth" in lowered:
        return f"the sentinels refused their password, so none named the primary of {service}: check sentinel_password"
    if "connection refused" in lowered:
        return f"no sentinel answered (connection refused), so none named the primary of {service}"
    if "timeouterror" in lowered:
        return f"no sentinel answered in time, so none named the primary of {service}"
    return f"the sentinels name no primary of {service} that is up: check the service name, or wait for the failover"


class ScriptError(WurkError):
    """A Lua script is missing, malformed, or registered twice."""


class FrozenConfigError(WurkError, RuntimeError):
    """The configuration was changed after the worker froze it at boot."""


class EmbeddedProcessError(WurkError):
    """An embedded process cannot be quieted or stopped through Redis: it
    runs inside a host process whose lifecycle its host owns."""


class Shutdown(BaseException):
    """The process is shutting down: unwind the job without booking a failure.

    A BaseException, so that a job's ``except Exception`` cannot swallow it;
    its job stays in the private list and goes back to its queue.
    """


class Interrupted(WurkError):
    """Raised by a job that stops early on purpose (an iterable job at a
    checkpoint, a cooperative cancel): its job goes back to the front of its
    queue unchanged, with no retry booked.

    ``cursor`` is where the job's next run starts, as JSON text, when the job
    knows (an iterable job sets it as it stops), so that the job log can say
    ``interrupted at cursor 41, requeued``; ``None`` otherwise."""

    cursor: str | None = None


class CursorError(WurkError, TypeError):
    """An iterable job's cursor cannot be checkpointed: it does not come back
    from JSON as itself, so a resumed run would start from the wrong place."""
