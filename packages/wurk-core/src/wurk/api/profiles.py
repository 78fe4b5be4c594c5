"""Stored job profiles: the ``profiles`` sorted set and one hash per profile.

A profile is kept for a day (see :mod:`wurk.server.profiler`); its entry in
``profiles`` is scored by the time it expires, so the newest profile has the
highest score and a lapsed entry is one whose score has passed. Listing
reads only live entries, and :meth:`ProfileSet.prune` drops the lapsed ones
as Sidekiq's listing does. Profiles written by Ruby Sidekiq (Vernier's) are
listed alongside Python ones; only a Python profile's data opens with
``pstats`` here (:attr:`ProfileRecord.python`).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from wurk.api._base import PAGE_SIZE, RedisAccess, as_int, text
from wurk.api.paging import page_by_score
from wurk.redis import keys
from wurk.server.profiler import FORMAT, Timing, decode, top_functions

if TYPE_CHECKING:
    import pstats

    from wurk.config.configuration import Config
    from wurk.redis.connection import RedisPool

#: The hash fields a listing reads: everything but the data.
FIELDS = ("started_at", "jid", "type", "token", "size", "elapsed", "format", "filename")


class ProfileRecord:
    """One stored profile: who asked (``token``), the job, its timings. The
    data itself is read only when asked for (:attr:`data`, :meth:`stats`)."""

    def __init__(self, key: str, fields: dict[str, Any], expires_at: float, access: ProfileSet) -> None:
        self.key = key
        self.jid = text(fields.get("jid"))
        self.type = text(fields.get("type"))
        self.token = text(fields.get("token"))
        self.size = as_int(fields.get("size"))
        self.filename = text(fields.get("filename"))
        #: ``"pstats"`` for a profile Wurk for Python wrote; ``None`` for one
        #: from Ruby Sidekiq, which writes no such field (a Vernier profile).
        self.format = text(fields["format"]) if fields.get("format") is not None else None
        try:
            self.elapsed = float(fields.get("elapsed") or 0.0)
        except ValueError:
            self.elapsed = 0.0
        self.started_at = datetime.fromtimestamp(as_int(fields.get("started_at")), UTC)
        self.expires_at = datetime.fromtimestamp(expires_at, UTC)
        self._access = access

    def __repr__(self) -> str:
        return f"<ProfileRecord {self.key!r} {self.type} {self.size} bytes>"

    @property
    def python(self) -> bool:
        """Whether :meth:`stats` can open it."""
        return self.format == FORMAT

    @property
    def data(self) -> bytes:
        """The stored data as written: gzipped marshalled ``pstats`` for a
        Python profile, gzipped Vernier JSON for a Ruby one (one ``HGET``)."""
        value = self._access.run(lambda conn: conn.hget(self.key, "data"))
        if value is None:
            return b""
        return value if isinstance(value, bytes) else value.encode("latin-1")

    def stats(self) -> pstats.Stats:
        """The profile as ``pstats.Stats`` (``.sort_stats("cumulative").print_stats(20)``);
        ``ValueError`` for a profile from Ruby Sidekiq."""
        if not self.python:
            raise ValueError(f"profile {self.key!r} was written by Ruby Sidekiq (Vernier), not by Python's profiler")
        return decode(self.data)

    def top(self, limit: int = 30) -> list[Timing]:
        """The ``limit`` functions with the longest cumulative time."""
        return top_functions(self.stats(), limit)

    def delete(self) -> bool:
        """Remove the profile and its ``profiles`` entry; False when it was already gone."""
        return self._access.delete(self.key)


class ProfileSet(RedisAccess):
    """The stored profiles, newest first::

    profiles = ProfileSet()
    rows, cursor = profiles.page(limit=25)
    record = profiles.fetch(rows[0].key)
    record.stats().sort_stats("cumulative").print_stats(10)
    """

    def __init__(self, *, config: Config | None = None, pool: RedisPool | str | None = None) -> None:
        super().__init__(config=config, pool=pool)

    @property
    def size(self) -> int:
        """Profiles not yet expired."""
        return int(self.run(lambda conn: conn.zcount(keys.PROFILES, f"({time.time()!r}", "+inf")))

    def __len__(self) -> int:
        return self.size

    def __iter__(self) -> Iterator[ProfileRecord]:
        cursor: str | None = None
        while True:
            rows, cursor = self.page(limit=PAGE_SIZE, cursor=cursor)
            yield from rows
            if cursor is None:
                return

    def prune(self) -> int:
        """Drop the entries whose profile has expired; how many were dropped."""
        return int(self.run(lambda conn: conn.zremrangebyscore(keys.PROFILES, "-inf", time.time())))

    def page(self, *, limit: int = 25, cursor: str | None = None) -> tuple[list[ProfileRecord], str | None]:
        """Up to ``limit`` profiles, newest first, and the cursor of the next
        page (None after the last). A cursor (``"<score>:<seen>"``) is stable:
        a profile stored or expiring meanwhile does not shift the pages."""
        if limit < 1:
            raise ValueError(f"limit must be at least 1, got {limit}")
        now = time.time()
        entries, after = self.run(lambda conn: page_by_score(conn, keys.PROFILES, cursor, limit, floor=f"({now!r}"))
        return self._records(entries), after

    def fetch(self, key: str) -> ProfileRecord | None:
        """The profile stored under ``key`` (``"<token>-<jid>"``), or None."""
        score, values = self.run(lambda conn: _read_one(conn, key))
        if score is None or not _complete(values):
            return None
        return ProfileRecord(key, dict(zip(FIELDS, values, strict=True)), float(score), self)

    def delete(self, key: str) -> bool:
        """Remove one profile (its hash and its entry); False when there was none."""

        def remove(conn: Any) -> tuple[int, int]:
            pipe = conn.pipeline(transaction=True)
            pipe.zrem(keys.PROFILES, key)
            pipe.delete(key)
            removed, deleted = pipe.execute()
            return int(removed), int(deleted)

        removed, deleted = self.run(remove)
        return bool(removed or deleted)

    def clear(self) -> int:
        """Remove every listed profile; how many entries there were."""
        members: list[Any] = self.run(lambda conn: list(conn.zrange(keys.PROFILES, 0, -1)))
        for member in members:
            self.delete(text(member))
        return len(members)

    def _records(self, entries: list[tuple[Any, float]]) -> list[ProfileRecord]:
        """The records of ``entries`` in one pipelined round trip; an entry
        whose hash is gone (expired first) is left out."""
        if not entries:
            return []

        def read(conn: Any) -> list[list[Any]]:
            pipe = conn.pipeline(transaction=False)
            for member, _score in entries:
                pipe.hmget(member, FIELDS)
            return list(pipe.execute())

        found = self.run(read)
        return [
            ProfileRecord(text(member), dict(zip(FIELDS, values, strict=True)), score, self)
            for (member, score), values in zip(entries, found, strict=True)
            if _complete(values)
        ]


def _read_one(conn: Any, key: str) -> tuple[Any, list[Any]]:
    pipe = conn.pipeline(transaction=False)
    pipe.zscore(keys.PROFILES, key)
    pipe.hmget(key, FIELDS)
    score, values = pipe.execute()
    if score is not None and score <= time.time():
        return None, values  # listed, but expired
    return score, values


def _complete(values: list[Any]) -> bool:
    """A hash that still has the fields every writer sets."""
    return values[0] is not None and values[1] is not None
