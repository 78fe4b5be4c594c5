"""Booking a death in the dead set: the payload joins the set, the set is
trimmed to ``dead_max_jobs`` and ``dead_timeout_in_seconds``, the death
handlers run (unless told not to), and this process's plugins hear the
outcome ``died`` / ``killed``.

:class:`~wurk.api.dead.DeadSet` writes through :class:`Deaths`, and so do
the other sorted sets' ``kill`` and ``kill_all``: the dead set is a
:class:`~wurk.api.sorted.JobSet`, so the sorted sets reach the dead set's
writes here, in a module that imports neither of them.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from wurk.api._base import RedisAccess
from wurk.api.members import Member, as_member, zadd_member
from wurk.plugins import outcomes
from wurk.plugins.outcomes import Outcome
from wurk.redis import keys
from wurk.server.retry import KILLED_BY_API, JobRetry

if TYPE_CHECKING:
    from wurk.config.configuration import Config
    from wurk.redis.connection import RedisPool


class Deaths(RedisAccess):
    """The writes to a dead set (``dead`` unless named otherwise)."""

    def __init__(self, name: str = keys.DEAD, *, config: Config | None = None, pool: RedisPool | str | None = None):
        super().__init__(config, pool)
        self.name = name

    def _limits(self, max_jobs: int | None, timeout: float | None) -> tuple[int, float]:
        jobs = int(self.config["dead_max_jobs"] if max_jobs is None else max_jobs)
        age = float(self.config["dead_timeout_in_seconds"] if timeout is None else timeout)
        return jobs, age

    def _queue_trim(self, pipe: Any, now: float, max_jobs: int | None, timeout: float | None) -> None:
        jobs, age = self._limits(max_jobs, timeout)
        pipe.zremrangebyscore(self.name, "-inf", now - age)
        pipe.zremrangebyrank(self.name, 0, -jobs)

    def trim(self, *, max_jobs: int | None = None, timeout: float | None = None) -> bool:
        """Evict entries older than the timeout, then the oldest beyond the cap (one MULTI)."""

        def trim_on(conn: Any) -> None:
            pipe = conn.pipeline(transaction=True)
            self._queue_trim(pipe, time.time(), max_jobs, timeout)
            pipe.execute()

        self.run(trim_on)
        return True

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
        member = as_member(message)
        now = time.time()
        self.run(lambda conn: zadd_member(conn, self.name, member, now))
        if trim:
            self.trim(max_jobs=max_jobs, timeout=timeout)
        if notify_failure:
            self._notify(member, exc)
        self._tell_killed(member, exc)
        return True

    def kill_raw(
        self, payload: Member | Mapping[str, Any], *, max_jobs: int | None = None, timeout: float | None = None
    ) -> bool:
        """Add a payload and trim, in one MULTI, without death handlers (for a
        payload nobody can parse, or when the caller reports the death itself)."""
        member = as_member(payload)

        def add_on(conn: Any) -> None:
            now = time.time()
            pipe = conn.pipeline(transaction=True)
            pipe.zadd(self.name, {member: now})
            self._queue_trim(pipe, now, max_jobs, timeout)
            pipe.execute()

        self.run(add_on)
        return True

    def _notify(self, member: Member, exc: BaseException | None) -> None:
        try:
            job = json.loads(member)
        except (ValueError, RecursionError):
            return  # no job to hand a handler, as for kill_raw
        if not isinstance(job, dict):
            return
        JobRetry(self.config).run_death_handlers(job, exc if exc is not None else api_kill_error(), "killed")

    def _tell_killed(self, member: Member, exc: BaseException | None) -> None:
        """Tell the plugins, in this process, the outcome ``died`` / ``killed``:
        even with ``notify_failure=False``, which spares the death handlers
        only, since a plugin's bookkeeping (a lock, a counter) must still hear
        the job is gone."""
        if not outcomes.listening(self.config):
            return
        try:
            job = json.loads(member)
        except (ValueError, RecursionError):
            return
        if isinstance(job, dict):
            error = exc if exc is not None else api_kill_error()
            outcomes.report(self.config, Outcome.of("died", job, reason="killed", exception=error))


def api_kill_error() -> RuntimeError:
    """The exception death handlers get for a kill with no real error: raised
    and caught here so that it carries a traceback, as a real one would."""
    try:
        raise RuntimeError(KILLED_BY_API)
    except RuntimeError as exc:
        return exc


__all__ = ["Deaths", "api_kill_error"]
