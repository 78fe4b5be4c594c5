"""Exceptions raised by Wurk core; every one derives from :class:`WurkError`."""

from __future__ import annotations


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

    The message names the server URL (with any password masked), so that a
    misconfigured ``REDIS_URL`` is obvious from the first line of the log.
    """

    def __init__(self, url: str, cause: BaseException) -> None:
        super().__init__(f"cannot reach Redis at {url}: {cause}")
        self.url = url


class ScriptError(WurkError):
    """A Lua script is missing, malformed, or registered twice."""


class FrozenConfigError(WurkError, RuntimeError):
    """The configuration was changed after the worker froze it at boot."""


class Shutdown(BaseException):
    """The process is shutting down: unwind the job without booking a failure.

    A BaseException, so that a job's ``except Exception`` cannot swallow it;
    its job stays in the private list and goes back to its queue.
    """


class Interrupted(WurkError):
    """Raised by a job that stops early on purpose (an iterable job at a
    checkpoint, a cooperative cancel): its job goes back to the front of its
    queue unchanged, with no retry booked."""
