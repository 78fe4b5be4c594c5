"""One member of the ``schedule``, ``retry`` or ``dead`` sorted set.

Every mutation that moves a job elsewhere (``retry``, ``add_to_queue``,
``kill``) first removes the exact member from its set and acts only if that
removal is the one that took it. Two people pressing "Retry" on the same
entry at the same moment therefore push one job, not two: Redis answers
``ZREM`` with 1 for exactly one of them.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from wurk.api._base import epoch_seconds
from wurk.api.deaths import Deaths
from wurk.api.record import JobRecord

if TYPE_CHECKING:
    from wurk.api.sorted import SortedSet


class SortedEntry(JobRecord):
    """A job in a sorted set, with its score (epoch seconds).

    ``queue`` is the payload's own ``queue`` field: a sorted set is not a queue.
    """

    def __init__(self, parent: SortedSet, score: float, value: bytes | str) -> None:
        super().__init__(value, None, config=parent.config, pool=parent._pool)
        self.parent = parent
        self._score = float(score)

    @property
    def score(self) -> float:
        return self._score

    @property
    def at(self) -> datetime:
        """The score as an aware UTC datetime."""
        return datetime.fromtimestamp(self._score, UTC)

    @property
    def id(self) -> str:
        """``"<score>|<jid>"``, the score written as Ruby writes a Float (which
        is Python's ``repr``), so ids match the ones Ruby tools produce. Split it
        and pass both halves to ``JobSet.fetch`` to find the entry again cheaply."""
        return f"{self._score!r}|{self.jid}"

    def error(self) -> bool:
        """Whether the payload records a failure (has an ``error_class``)."""
        return bool(self.item.get("error_class"))

    def __repr__(self) -> str:
        return f"<SortedEntry {self.parent.name} {self.display_class} jid={self.jid!r} score={self._score!r}>"

    # -- mutations --------------------------------------------------------------

    def delete(self) -> bool:
        """Remove this entry from its set; False if it was already gone."""
        if self._value:
            return self.parent.delete_by_value(self.parent.name, self._value)
        return self.parent.delete_by_jid(self._score, self.jid or "")

    def reschedule(self, at: datetime | float) -> float | None:
        """Move the entry to ``at``; the new score, or None if the entry is gone.

        The change is sent as a delta from the current score, so a difference
        between this machine's clock and another's does not matter. It is an
        ``ZADD XX INCR`` rather than a plain ``ZINCRBY``: the increment applies
        only while the member exists, so an entry that was retried or deleted
        meanwhile is not brought back with a meaningless score. A lost reply
        raises :class:`wurk.LostReplyError` rather than moving it twice.
        """
        delta = epoch_seconds(at) - self._score
        # As bytes, the form redis-py sends anyway: its ``zadd`` takes members of
        # one type, not the ``bytes | str`` a record may hold.
        value = self._value.encode() if isinstance(self._value, str) else self._value
        name = self.parent.name
        # Not sent again after a lost reply (LostReplyError): a repeated
        # increment would move the entry by twice the delta.
        new_score = self.pool.execute(lambda conn: conn.zadd(name, {value: delta}, xx=True, incr=True), once=True)
        if new_score is None:
            return None
        self._score = float(new_score)
        return self._score

    def add_to_queue(self) -> dict[str, Any] | None:
        """Remove the entry and enqueue the job now, payload unchanged; the
        payload, or None when someone else took the entry first."""
        return self._requeue(count_attempt=False)

    def retry(self) -> dict[str, Any] | None:
        """Remove the entry and enqueue the job now, with ``retry_count`` one
        lower so that a manual retry does not use up an attempt (its next
        failure adds it back); the payload, or None when someone else took the
        entry first."""
        return self._requeue(count_attempt=True)

    def kill(self) -> dict[str, Any] | None:
        """Remove the entry and add it to the dead set, running the death
        handlers; the payload, or None when someone else took the entry first."""
        taken = self.parent._take(self)
        if taken is None:
            return None
        Deaths(config=self.config, pool=self._pool).kill(taken)
        return dict(self.item)

    def _requeue(self, *, count_attempt: bool) -> dict[str, Any] | None:
        if not self.valid:
            raise ValueError(f"cannot enqueue {self!r}: its payload is not a JSON job (delete or kill it instead)")
        job_set = self.parent
        taken = job_set._take(self)
        if taken is None:
            return None
        job: dict[str, Any] = json.loads(taken)
        # "Now" is the point: a leftover ``at`` would send the job back to the schedule.
        job.pop("at", None)
        if count_attempt and type(job.get("retry_count")) is int:
            job["retry_count"] -= 1
        try:
            job_set._client().push(job)
        except BaseException:
            job_set._restore(taken, self._score)  # not pushed: put the entry back where it was
            raise
        return job
