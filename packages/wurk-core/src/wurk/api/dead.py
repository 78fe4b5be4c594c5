"""The ``dead`` sorted set: jobs out of retries, scored by time of death.

A kill through this API books a death the way the retry layer does: the
payload joins the set, the set is trimmed to ``dead_max_jobs`` and
``dead_timeout_in_seconds``, the death handlers run (unless told not to),
and this process's plugins hear the outcome ``died`` / ``killed``. Those
writes are :class:`~wurk.api.deaths.Deaths`', which the other sorted sets
use too when they kill an entry.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from wurk.api.deaths import Deaths, api_kill_error
from wurk.api.members import Member
from wurk.api.sorted import JobSet
from wurk.redis import keys
from wurk.server.retry import KILLED_BY_API

if TYPE_CHECKING:
    from wurk.config.configuration import Config
    from wurk.redis.connection import RedisPool


class DeadSet(JobSet):
    """Jobs out of retries (``dead``), scored by time of death and kept within
    ``dead_max_jobs`` entries and ``dead_timeout_in_seconds`` of age."""

    API_KILL_MESSAGE = KILLED_BY_API

    def __init__(self, name: str = keys.DEAD, *, config: Config | None = None, pool: RedisPool | str | None = None):
        super().__init__(name, config=config, pool=pool)

    def _deaths(self) -> Deaths:
        return Deaths(self.name, config=self.config, pool=self._pool)

    def trim(self, *, max_jobs: int | None = None, timeout: float | None = None) -> bool:
        """Evict entries older than the timeout, then the oldest beyond the cap (one MULTI)."""
        return self._deaths().trim(max_jobs=max_jobs, timeout=timeout)

    def kill(
        self,
        message: Member | Mapping[str, Any],
        *,
        notify_failure: bool = True,
        exc: BaseException | None = None,
        trim: bool = True,
        max_jobs: int | None = None,
        timeout: float | None = None,
    ) -> bool:
        """Add a payload to the dead set now, trim the set, and run the death
        handlers with ``exc`` (by default a ``RuntimeError("Job killed by API")``,
        the message handlers written for Sidekiq look for). The outcome
        ``died`` / ``killed`` is told to this process's plugins."""
        return self._deaths().kill(
            message, notify_failure=notify_failure, exc=exc, trim=trim, max_jobs=max_jobs, timeout=timeout
        )

    def kill_raw(
        self, payload: Member | Mapping[str, Any], *, max_jobs: int | None = None, timeout: float | None = None
    ) -> bool:
        """Add a payload and trim, in one MULTI, without death handlers (for a
        payload nobody can parse, or when the caller reports the death itself)."""
        return self._deaths().kill_raw(payload, max_jobs=max_jobs, timeout=timeout)


__all__ = ["DeadSet", "api_kill_error"]
