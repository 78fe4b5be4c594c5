"""The ``schedule`` and ``retry`` sorted sets, scored by epoch seconds.

:class:`SortedSet` is the plain ZSET surface; :class:`JobSet` knows its
members are job payloads; :class:`ScheduledSet` and :class:`RetrySet` are two
of the three sets Wurk and Sidekiq keep (the dead set, with its trimming and
its death handlers, is :mod:`wurk.api.dead`; its writes, which ``kill`` and
``kill_all`` here use, are :mod:`wurk.api.deaths`). Members are removed by
their exact bytes whenever they are known, which is what makes a removal
both precise and a reliable "I took it" signal under concurrency.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Iterator, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any, cast, overload

from wurk.api._base import PAGE_SIZE, RedisAccess, epoch_seconds
from wurk.api.deaths import Deaths
from wurk.api.entry import SortedEntry
from wurk.api.members import Member, as_member, zadd_member
from wurk.errors import LostReplyError
from wurk.redis import keys
from wurk.server.scheduled import pop_lowest

if TYPE_CHECKING:
    from wurk.client.push import Client
    from wurk.config.configuration import Config
    from wurk.redis.connection import RedisPool

Score = datetime | float | int | str
_GLOB_SPECIALS = re.compile(r"([?\[\]\\])")


def scan_pattern(match: str) -> str:
    """The ZSCAN pattern for a search: a plain substring is wrapped in ``*…*``
    (its glob characters escaped so they match literally); a pattern that
    already has a ``*`` is used as given."""
    if "*" in match:
        return match
    escaped = _GLOB_SPECIALS.sub(r"\\\1", match)
    return f"*{escaped}*"


def _holds_jid(member: Member, jid: str) -> bool:
    """Whether a member is the payload of ``jid`` (cheap substring test first)."""
    raw = member if isinstance(member, str) else member.decode("utf-8", "replace")
    if jid not in raw:
        return False
    try:
        item = json.loads(raw)
    except (ValueError, RecursionError):
        return False
    return isinstance(item, dict) and item.get("jid") == jid


class SortedSet(RedisAccess):
    """A ZSET by key name."""

    def __init__(self, name: str, *, config: Config | None = None, pool: RedisPool | str | None = None) -> None:
        super().__init__(config, pool)
        self.name = name
        self._removed = 0  # removals made through this object, to keep paging aligned

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"

    def as_json(self) -> dict[str, str]:
        return {"name": self.name}

    @property
    def size(self) -> int:
        return int(self.run(lambda conn: conn.zcard(self.name)))

    def clear(self) -> bool:
        """Drop the whole set (``UNLINK``)."""
        self.run(lambda conn: conn.unlink(self.name))
        return True

    # -- scanning -----------------------------------------------------------------

    def scan_raw(self, match: str, count: int = 100) -> Iterator[tuple[Member, float]]:
        """``(member, score)`` pairs whose member contains ``match`` (``ZSCAN``).

        ZSCAN may return a member twice if the set changes during the scan.
        """
        pattern = scan_pattern(match)
        cursor = 0
        while True:

            def step(conn: Any, at: int = cursor) -> tuple[int, list[Any]]:
                reply: tuple[int, list[Any]] = conn.zscan(self.name, at, match=pattern, count=count)
                return reply

            cursor, rows = self.run(step)
            for member, score in rows:
                yield member, float(score)
            if int(cursor) == 0:
                return

    @overload
    def scan(self, match: str, callback: None = None, *, count: int = 100) -> Iterator[SortedEntry]: ...

    @overload
    def scan(self, match: str, callback: Callable[[SortedEntry], object], *, count: int = 100) -> int: ...

    def scan(
        self, match: str, callback: Callable[[SortedEntry], object] | None = None, *, count: int = 100
    ) -> Iterator[SortedEntry] | int:
        """Entries whose payload contains ``match``, as :class:`SortedEntry`.

        Without ``callback``, an iterator. With one, ``callback(entry)`` runs for
        each entry and the number visited is returned; the callback may delete,
        retry or kill its entry. For the raw ``(member, score)`` pairs use
        :meth:`scan_raw`.
        """
        if callback is not None and not callable(callback):
            raise TypeError(f"scan's second argument is a callback; pass count= by keyword (got {callback!r})")
        entries = (SortedEntry(self, score, member) for member, score in self.scan_raw(match, count))
        if callback is None:
            return entries
        visited = 0
        for entry in entries:
            callback(entry)
            visited += 1
        return visited

    # -- removal ------------------------------------------------------------------

    def delete_by_value(self, name: str, value: Member) -> bool:
        """Remove a member by its exact bytes (``ZREM``) from the set ``name``.

        A ``ZREM`` sent again after a lost reply answers 0 for the member it
        removed itself, and the caller would take it for someone else's
        removal and drop the job it was moving. So it is sent once, and a lost
        reply is settled by looking: a member gone is one this call removed."""
        try:
            removed = bool(self.pool.execute(lambda conn: conn.zrem(name, value), once=True))
        except LostReplyError:
            removed = self.run(lambda conn: conn.zscore(name, value)) is None
        if removed and name == self.name:
            self._removed += 1
        return removed

    def delete_by_jid(self, score: Score, jid: str) -> bool:
        """Remove the job ``jid`` among the members at exactly ``score``."""
        exact = epoch_seconds(score)
        members = cast(list[Member], self.run(lambda conn: conn.zrange(self.name, exact, exact, byscore=True)))
        return any(_holds_jid(member, jid) and self.delete_by_value(self.name, member) for member in members)

    def remove_job(self, entry: SortedEntry) -> bool:
        """Remove an entry by its exact bytes, else by its score and jid."""
        return self._take(entry) is not None

    def _take(self, entry: SortedEntry) -> Member | None:
        """Remove ``entry`` and return the member removed, or None if another
        caller removed it first (only one ZREM of a member answers 1)."""
        if self.delete_by_value(self.name, entry.value):
            return entry.value
        # The bytes may differ from what is stored (an entry built from a dict):
        # look for the jid among the members at that exact score.
        jid = entry.jid
        if not isinstance(jid, str) or not jid:
            return None
        score = entry.score
        members = cast(list[Member], self.run(lambda conn: conn.zrange(self.name, score, score, byscore=True)))
        for member in members:
            if _holds_jid(member, jid) and self.delete_by_value(self.name, member):
                return member
        return None

    def _restore(self, member: Member, score: float) -> None:
        self.run(lambda conn: zadd_member(conn, self.name, member, score))
        self._removed -= 1

    def _client(self) -> Client:
        from wurk.client.push import Client

        return Client(self.config, pool=self._pool)


class JobSet(SortedSet):
    """A sorted set whose members are job payloads."""

    def __iter__(self) -> Iterator[SortedEntry]:
        """Highest score first (latest death, furthest-out schedule), 50 a page.

        Removing the entries you are handed is safe: the paging accounts for it.
        """
        page = 0
        removed_before = self._removed
        while True:
            start = max(0, page * PAGE_SIZE - (self._removed - removed_before))
            rows = self.run(functools.partial(self._page, start=start))
            if not rows:
                return
            page += 1
            for member, score in rows:
                yield SortedEntry(self, score, member)

    def _page(self, conn: Any, start: int) -> list[Any]:
        command = ("ZRANGE", self.name, start, start + PAGE_SIZE - 1, "REV", "WITHSCORES")
        return list(conn.execute_command(*command, withscores=True, score_cast_func=float, keys=[self.name]))

    def schedule(self, timestamp: datetime | float, job: Mapping[str, Any] | Member) -> int:
        """Add a payload (a dict, or JSON already encoded) at ``timestamp``."""
        score = epoch_seconds(timestamp)
        member = as_member(job)
        return self.run(lambda conn: zadd_member(conn, self.name, member, score))

    def fetch(self, score: Score | tuple[Score, Score], jid: str | None = None) -> list[SortedEntry]:
        """The entries at a score, or within an inclusive ``(low, high)`` range,
        optionally only the job ``jid``. A score is a datetime or epoch seconds
        (a string such as the first half of ``SortedEntry.id`` is fine too)."""
        if isinstance(score, tuple):
            if len(score) != 2:
                raise TypeError(f"a score range is a (low, high) pair, got {score!r}")
            low, high = epoch_seconds(score[0]), epoch_seconds(score[1])
        else:
            low = high = epoch_seconds(score)
        rows = cast(
            list[tuple[Member, float]],
            self.run(lambda conn: conn.zrange(self.name, low, high, byscore=True, withscores=True)),
        )
        entries = [SortedEntry(self, found, member) for member, found in rows]
        return entries if jid is None else [entry for entry in entries if entry.jid == jid]

    def find_job(self, jid: str) -> SortedEntry | None:
        """The entry of ``jid``, by a ``ZSCAN`` of the whole set: O(n). When
        you know the score, :meth:`fetch` is one command."""
        for member, score in self.scan_raw(jid):
            if _holds_jid(member, jid):
                return SortedEntry(self, score, member)
        return None

    def pop_each(self) -> Iterator[tuple[Member, float]]:
        """Pop ``(member, score)`` lowest score first (a fenced pop, so a lost
        reply does not drop a member: ``wurk.server.scheduled.pop_lowest``), as many as
        the set held when the walk began (so a set that refills itself, like the
        dead set under ``kill_all``, still ends). Each member is gone from Redis
        before you see it."""
        remaining = self.size
        while remaining > 0:
            popped = pop_lowest(self.config, self.pool, self.name)
            if popped is None:
                return
            remaining -= 1
            self._removed += 1
            yield popped

    def retry_all(self) -> int:
        """Enqueue every entry now, each with ``retry_count`` one lower; the
        number enqueued. Not transactional: a failure part-way leaves the rest.
        Entries that are not valid jobs are left in the set."""
        client = self._client()
        enqueued = 0
        unusable: list[tuple[Member, float]] = []
        try:
            for member, score in self.pop_each():
                try:
                    job = json.loads(member)
                    if isinstance(job, dict):
                        job.pop("at", None)
                        if type(job.get("retry_count")) is int:
                            job["retry_count"] -= 1
                    client.push(job)
                except ValueError:  # not JSON, or not a job the client accepts
                    unusable.append((member, score))
                    continue
                except BaseException:
                    unusable.append((member, score))
                    raise
                enqueued += 1
        finally:
            for member, score in unusable:
                self._restore(member, score)
        return enqueued

    def kill_all(self, notify_failure: bool = True, exc: BaseException | None = None) -> int:
        """Move every entry to the dead set (death handlers run unless
        ``notify_failure=False``); the number moved. The dead set is trimmed
        once, at the end."""
        dead = Deaths(config=self.config, pool=self._pool)
        moved = 0
        try:
            for member, _score in self.pop_each():
                dead.kill(member, notify_failure=notify_failure, exc=exc, trim=False)
                moved += 1
        finally:
            dead.trim()
        return moved

    delete = SortedSet.delete_by_jid


class ScheduledSet(JobSet):
    """Jobs waiting for their time (``schedule``); the score is when they are due."""

    def __init__(self, name: str = keys.SCHEDULE, *, config: Config | None = None, pool: RedisPool | str | None = None):
        super().__init__(name, config=config, pool=pool)


class RetrySet(JobSet):
    """Failed jobs waiting for their next attempt (``retry``)."""

    def __init__(self, name: str = keys.RETRY, *, config: Config | None = None, pool: RedisPool | str | None = None):
        super().__init__(name, config=config, pool=pool)


__all__ = [
    "JobSet",
    "Member",
    "RetrySet",
    "ScheduledSet",
    "SortedEntry",
    "SortedSet",
    "as_member",
    "scan_pattern",
    "zadd_member",
]
