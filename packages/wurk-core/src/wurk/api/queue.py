"""One named queue: the ``queue:<name>`` LIST and its place in the ``queues`` SET.

Jobs are pushed at the head (``LPUSH``) and workers take them from the tail,
so the tail holds the oldest job: latency is read there, and walking the list
from index 0 visits the newest job first, as Sidekiq's Web UI does.

The two bulk deletions run as Lua scripts that read the list inside Redis, so
deleting one job from a million-entry queue is one round trip instead of
twenty thousand pages over the network.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from wurk.api._base import PAGE_SIZE, RedisAccess, text
from wurk.api.record import JobRecord, raw_latency
from wurk.client import payload as wire
from wurk.redis import keys

if TYPE_CHECKING:
    from wurk.config.configuration import Config
    from wurk.redis.connection import RedisPool
    from wurk.redis.scripts import Arg

__all__ = ["JobRecord", "Queue"]

#: Entries the deletion scripts read per LRANGE inside Redis.
SCRIPT_CHUNK = 1000


class Queue(RedisAccess):
    """A queue by name; ``Queue()`` is ``default``.

    Reads are live: every ``size`` or ``latency`` asks Redis again.
    """

    def __init__(
        self, name: str = "default", *, config: Config | None = None, pool: RedisPool | str | None = None
    ) -> None:
        super().__init__(config, pool)
        self.name = str(name)
        self.key = keys.queue(self.name)
        self._removed = 0  # deletions made through this object, to keep paging aligned

    @classmethod
    def all(cls, *, config: Config | None = None, pool: RedisPool | str | None = None) -> list[Queue]:
        """Every known queue (members of ``queues``), sorted by name."""
        access = RedisAccess(config, pool)
        names = access.run(lambda conn: list(conn.sscan_iter(keys.QUEUES)))
        return [cls(name, config=access.config, pool=pool) for name in sorted({text(n) for n in names})]

    @property
    def id(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"<Queue {self.name}>"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Queue) and other.name == self.name

    def __hash__(self) -> int:
        return hash(("queue", self.name))

    def as_json(self) -> dict[str, str]:
        return {"name": self.name}

    # -- reads ------------------------------------------------------------------

    @property
    def size(self) -> int:
        return int(self.run(lambda conn: conn.llen(self.key)))

    @property
    def latency(self) -> float:
        """Seconds the oldest job has waited; 0.0 for an empty queue."""
        tail = self.run(lambda conn: conn.lindex(self.key, -1))
        return raw_latency(tail, time.time())

    @property
    def paused(self) -> bool:
        """Whether workers skip this queue (membership of the ``paused`` SET)."""
        return bool(self.run(lambda conn: conn.sismember(keys.PAUSED, self.name)))

    def __iter__(self) -> Iterator[JobRecord]:
        """Newest job first, fetched 50 at a time.

        The list is live: jobs pushed or taken while you walk it can be seen
        twice or missed. Deleting the records you are handed is safe; the
        paging accounts for them.
        """
        page = 0
        removed_before = self._removed
        while True:
            start = max(0, page * PAGE_SIZE - (self._removed - removed_before))
            entries = self._page_from(start)
            if not entries:
                return
            page += 1
            for entry in entries:
                record = JobRecord(entry, self.name, config=self.config, pool=self._pool)
                record._owner = self
                yield record

    def _page_from(self, start: int) -> list[bytes | str]:
        """Up to ``PAGE_SIZE`` entries from index ``start``, newest first."""
        return self.run(lambda conn: conn.lrange(self.key, start, start + PAGE_SIZE - 1))

    def _note_removed(self, count: int) -> None:
        self._removed += count

    def find_job(self, jid: str) -> JobRecord | None:
        """The job with this jid, by walking the queue: O(n) round trips / 50.
        To remove a job, :meth:`delete_job` is one round trip."""
        return next((record for record in self if record.jid == jid), None)

    # -- writes -----------------------------------------------------------------

    def clear(self) -> bool:
        """Drop every job and forget the queue (``UNLINK`` + ``SREM queues``)."""

        def clear_on(conn: Any) -> None:
            pipe = conn.pipeline(transaction=True)
            pipe.unlink(self.key)
            pipe.srem(keys.QUEUES, self.name)
            pipe.execute()

        self.run(clear_on)
        return True

    def pause(self) -> bool:
        """Stop workers fetching from this queue, cluster-wide. Idempotent."""
        self.run(lambda conn: conn.sadd(keys.PAUSED, self.name))
        return True

    def unpause(self) -> bool:
        """Let workers fetch from this queue again. Idempotent."""
        self.run(lambda conn: conn.srem(keys.PAUSED, self.name))
        return True

    def delete_job(self, jid: str) -> int:
        """Remove the job with this jid; how many payloads went (one round trip)."""
        if not isinstance(jid, str) or not jid.strip():
            raise ValueError(f"delete_job needs a jid, got {jid!r}")
        return self._delete(jid, "jid")

    def delete_by_class(self, klass: Any) -> int:
        """Remove every job of a class (a job class or its wire name), including
        wrapper jobs whose ``wrapped`` class it is; how many went (one round trip)."""
        name = wire.class_name(klass) if not isinstance(klass, str) else klass
        if not name.strip():
            raise ValueError(f"delete_by_class needs a class name, got {klass!r}")
        return self._delete(name, "class", "wrapped")

    def _delete(self, value: str, *fields: str) -> int:
        scripts = self.config.scripts
        args: list[Arg] = [value, SCRIPT_CHUNK, *fields]
        removed = int(self.run(lambda conn: scripts.call("core.queue_delete_matching", conn, [self.key], args)))
        self._note_removed(removed)
        return removed
