"""Reading batches: ``Status`` (one batch), ``BatchSet`` (all of them),
``DeadSet`` (those that fired death).

A :class:`Status` reads the ``b-<bid>`` hash once when built (``reload()``
reads it again); its properties are served from that snapshot. The methods
(``failed_jids()``, ``dead_jids()``, ``child_count()``, ``data()``) read the
companion sets live. The hash is read as Sidekiq Pro writes it, so a Ruby
batch is read the same way as a Python one.

Python spellings of the guides' Ruby names: ``exists?`` → ``exists``,
``complete?`` → ``complete``, ``invalidated?`` → ``invalidated``,
``reload!`` → ``reload()``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping
from typing import Any

import wurk
from wurk_batches import keys
from wurk_batches.constants import JOIN_POLL_INTERVAL


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _number(value: str | None) -> float | None:
    if value is None or value == "":
        return None
    try:
        return float(value)
    except ValueError:
        return None


class Status:
    """A read-only snapshot of one batch."""

    def __init__(self, bid: str, *, config: wurk.Config | None = None) -> None:
        if not isinstance(bid, str) or not bid.strip():
            raise ValueError(f"a batch status needs a bid, got {bid!r}")
        self.bid = bid
        self.config = config or wurk.current_config()
        self._data: dict[str, str] = {}
        self.reload()

    @classmethod
    def from_hash(cls, bid: str, fields: Mapping[Any, Any], *, config: wurk.Config | None = None) -> Status:
        """A status built from the ``b-<bid>`` hash as already read (``HGETALL``),
        for a listing that reads a page of batches in one pipeline."""
        status = cls.__new__(cls)
        status.bid = bid
        status.config = config or wurk.current_config()
        status._data = {_text(field): _text(value) for field, value in fields.items()}
        return status

    def __repr__(self) -> str:
        return f"<Status {self.bid} pending={self.pending}/{self.total} failures={self.failures}>"

    def _redis(self, operation: Any) -> Any:
        return self.config.redis_pool.execute(operation)

    def reload(self) -> Status:
        """Read the hash again (the guides' ``reload!``)."""
        raw = self._redis(lambda conn: conn.hgetall(keys.batch(self.bid)))
        self._data = {_text(field): _text(value) for field, value in raw.items()}
        return self

    def _int(self, field: str) -> int:
        value = _number(self._data.get(field))
        return int(value) if value is not None else 0

    @property
    def exists(self) -> bool:
        """False when the hash is gone: never created, deleted, or expired."""
        return bool(self._data)

    @property
    def total(self) -> int:
        return self._int("total")

    @property
    def pending(self) -> int:
        return self._int("pending")

    @property
    def failures(self) -> int:
        return self._int("failures")

    @property
    def created_at(self) -> float | None:
        return _number(self._data.get("created_at"))

    @property
    def complete_at(self) -> float | None:
        return _number(self._data.get("complete_at"))

    @property
    def success_at(self) -> float | None:
        return _number(self._data.get("success_at"))

    @property
    def death_at(self) -> float | None:
        return _number(self._data.get("death_at"))

    @property
    def description(self) -> str | None:
        return self._data.get("description") or None

    @property
    def parent_bid(self) -> str | None:
        return self._data.get("parent_bid") or None

    @property
    def callback_queue(self) -> str | None:
        return self._data.get("callback_queue") or None

    @property
    def invalidated(self) -> bool:
        return self._data.get("invalidated") == "1"

    @property
    def tags(self) -> list[str]:
        """The tags; ``[]`` when the field is missing or not a JSON list."""
        try:
            parsed = json.loads(self._data.get("tags") or "[]")
        except ValueError:
            return []
        return [str(tag) for tag in parsed] if isinstance(parsed, list) else []

    @property
    def complete_flag(self) -> bool:
        """The hash's own flag, set once complete fired (``complete`` also recounts)."""
        return self._data.get("complete") == "1"

    @property
    def complete(self) -> bool:
        """The hash's flag; failing that, a live recount (jobs added, none live)."""
        if self._data.get("complete") == "1":
            return True
        return self.total > 0 and self._redis(lambda conn: conn.scard(keys.jids(self.bid))) == 0

    @property
    def failure_info(self) -> list[Any]:
        """Always ``[]``: the pre-Pro-8 per-failure details are not kept (see
        ``failed_jids()``); here so that code written for them still runs."""
        return []

    def failed_jids(self) -> list[str]:
        return sorted(_text(jid) for jid in self._redis(lambda conn: conn.smembers(keys.failed(self.bid))))

    def dead_jids(self) -> list[str]:
        return sorted(_text(jid) for jid in self._redis(lambda conn: conn.smembers(keys.died(self.bid))))

    def child_count(self) -> int:
        return int(self._redis(lambda conn: conn.scard(keys.kids(self.bid))))

    def data(self) -> dict[str, Any]:
        """A JSON-serialisable summary: what the polling endpoint serves."""
        return {
            "bid": self.bid,
            "total": self.total,
            "pending": self.pending,
            "failures": self.failures,
            "created_at": self.created_at,
            "complete_at": self.complete_at,
            "success_at": self.success_at,
            "death_at": self.death_at,
            "complete": self.complete,
            "invalidated": self.invalidated,
            "description": self.description,
            "parent_bid": self.parent_bid,
            "callback_queue": self.callback_queue,
            "tags": self.tags,
            "failed_jids": self.failed_jids(),
            "dead_jids": self.dead_jids(),
            "child_count": self.child_count(),
        }

    def join(self, timeout: float | None = None, interval: float = JOIN_POLL_INTERVAL) -> None:
        """Block until the batch is complete, reading it every ``interval``
        seconds; ``TimeoutError`` after ``timeout``. For tests and scripts:
        a worker thread waiting here is a thread doing nothing."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self.reload().complete:
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(f"batch {self.bid} not complete after {timeout}s")
            time.sleep(interval)

    def delete(self) -> None:
        """Remove every key of the batch and its entries in ``batches`` and
        ``dead-batches``. The callback markers stay (with their own TTL), so
        a batch recreated under this bid would not fire again; jobs still
        queued ack against nothing."""

        def delete(conn: Any) -> None:
            pipe = conn.pipeline(transaction=True)
            pipe.unlink(*keys.all_keys(self.bid))
            pipe.zrem(keys.BATCHES, self.bid)
            pipe.zrem(keys.DEAD_BATCHES, self.bid)
            pipe.execute()

        self._redis(delete)
        self._data = {}


class _Listing:
    """Bids in a sorted set, newest first, read a page at a time."""

    PAGE = 100
    key = keys.BATCHES

    def __init__(self, *, config: wurk.Config | None = None) -> None:
        self.config = config or wurk.current_config()

    @property
    def size(self) -> int:
        return int(self.config.redis_pool.execute(lambda conn: conn.zcard(self.key)))

    def __len__(self) -> int:
        return self.size

    def bids(self) -> Iterator[str]:
        start = 0
        while True:
            page = self._page(start)
            yield from (_text(bid) for bid in page)
            if len(page) < self.PAGE:
                return
            start += self.PAGE

    def _page(self, start: int) -> list[Any]:
        page: list[Any] = self.config.redis_pool.execute(
            lambda conn: conn.zrevrange(self.key, start, start + self.PAGE - 1)
        )
        return page

    def __iter__(self) -> Iterator[Status]:
        """A :class:`Status` per batch (one read each), newest first."""
        for bid in self.bids():
            yield Status(bid, config=self.config)


class BatchSet(_Listing):
    """Every batch (the ``batches`` sorted set)."""

    def scan_tags(self, tag: str) -> Iterator[str]:
        """The bids of the batches tagged ``tag``, without reading any batch."""
        for bid in self.config.redis_pool.client.sscan_iter(keys.tag(str(tag)), count=500):
            yield _text(bid)


class DeadSet(_Listing):
    """The batches that fired death (``dead-batches``), newest first."""

    key = keys.DEAD_BATCHES
