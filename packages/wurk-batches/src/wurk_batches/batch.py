"""``Batch``: a group of jobs with one identity in Redis and callbacks that
fire when the group reaches a terminal state.

::

    batch = Batch()
    batch.description = "Nightly import"
    batch.on("success", ImportCallback, {"account_id": 42})
    with batch.jobs():
        for row in rows:
            ImportRowJob.perform_async(row.id)

``Batch()`` allocates a bid and writes nothing; the first ``jobs`` block
writes the batch (its hash, its ``batches`` entry, tag indexes, expiry) and
links it to the batch whose block encloses it, if any. ``Batch(bid)``
reopens an existing batch, to add jobs or callbacks to it.

Python spellings of the guides' Ruby names: ``mutable?`` → ``mutable``,
``valid?`` → ``valid``, ``include?(jid)`` → ``include(jid)``, and the block
of ``jobs { … }`` → ``with batch.jobs(): …``.
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from datetime import timedelta
from typing import Any, ClassVar

import wurk
from wurk import testing
from wurk.client import payload as wire
from wurk.redis import fence
from wurk_batches import context, keys
from wurk_batches import status as statuses
from wurk_batches.books import Books
from wurk_batches.callbacks import Empty, normalize_class, normalize_target
from wurk_batches.constants import (
    CALLBACK_NOTIFY_TTL,
    DEFAULT_CALLBACK_QUEUE,
    DEFAULT_EXPIRY_SECONDS,
    POST_SUCCESS_EXPIRY_SECONDS,
)
from wurk_batches.middleware import counted_under_testing
from wurk_batches.writer import flush_held


def new_bid() -> str:
    """URL-safe base64 of 10 random bytes: 14 characters, as Sidekiq Pro's."""
    return base64.urlsafe_b64encode(os.urandom(10)).decode().rstrip("=")


def _seconds(value: Any, what: str) -> int:
    if isinstance(value, timedelta):
        value = value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise ValueError(f"{what} must be a positive number of seconds or a timedelta, got {value!r}")
    return max(1, int(value))


class Batch:
    """Create a batch (``Batch()``) or reopen one (``Batch(bid)``)."""

    Status: ClassVar[type[statuses.Status]] = statuses.Status
    DeadSet: ClassVar[type[statuses.DeadSet]] = statuses.DeadSet
    DEFAULT_EXPIRY_SECONDS: ClassVar[int] = DEFAULT_EXPIRY_SECONDS
    POST_SUCCESS_EXPIRY_SECONDS: ClassVar[int] = POST_SUCCESS_EXPIRY_SECONDS
    CALLBACK_NOTIFY_TTL: ClassVar[int] = CALLBACK_NOTIFY_TTL

    def __init__(self, bid: str | None = None, *, config: wurk.Config | None = None) -> None:
        self.config = config or wurk.current_config()
        self._description: str | None = None
        self._callback_queue = DEFAULT_CALLBACK_QUEUE
        self._callback_class: str | None = None
        self._tags: list[str] = []
        self._autoflush: int | None = None
        self._linger: int | None = None
        self._expiry = DEFAULT_EXPIRY_SECONDS
        self._callbacks: dict[str, list[str]] = {event: [] for event in keys.EVENTS}
        self.parent_bid: str | None = None
        if bid is None:
            self.bid = new_bid()
            self._mutable = True
            return
        if not isinstance(bid, str) or not bid.strip():
            raise ValueError(f"reopening a batch needs its bid, got {bid!r}")
        self.bid = bid
        self._mutable = False
        self._restore()

    def __repr__(self) -> str:
        return f"<Batch {self.bid}>"

    def _restore(self) -> None:
        """Read back what a reopened batch was created with."""
        status = statuses.Status(self.bid, config=self.config)
        self._description = status.description
        self._callback_queue = status.callback_queue or DEFAULT_CALLBACK_QUEUE
        self._tags = status.tags
        self.parent_bid = status.parent_bid
        raw: list[Any] = self.config.redis_pool.execute(
            lambda conn: conn.hmget(keys.batch(self.bid), ["callback_class", "linger"])
        )
        klass, linger = raw
        self._callback_class = klass.decode() if klass else None
        self._linger = int(linger) if linger and linger.isdigit() else None

    # -- what is written at the first flush ----------------------------------------------

    @property
    def mutable(self) -> bool:
        """True until the first ``jobs`` block wrote the batch; False for a reopened batch."""
        return self._mutable

    def _settable(self, name: str) -> None:
        if not self._mutable:
            self.config.logger.warning(
                "batch %s: %s is only saved by the first jobs block; this change stays in this object", self.bid, name
            )

    @property
    def description(self) -> str | None:
        return self._description

    @description.setter
    def description(self, value: str | None) -> None:
        if value is not None and not isinstance(value, str):
            raise ValueError(f"a batch description must be a string, got {value!r}")
        self._settable("description")
        self._description = value

    @property
    def callback_queue(self) -> str:
        return self._callback_queue

    @callback_queue.setter
    def callback_queue(self, value: str) -> None:
        self._settable("callback_queue")
        self._callback_queue = wire.validate_queue(value, f"batch {self.bid} callback_queue")

    @property
    def callback_class(self) -> str | None:
        """The class a ``"#method"`` callback resolves against, as a dotted path."""
        return self._callback_class

    @callback_class.setter
    def callback_class(self, value: type | str | None) -> None:
        self._settable("callback_class")
        self._callback_class = normalize_class(value)

    @property
    def tags(self) -> list[str]:
        return list(self._tags)

    @tags.setter
    def tags(self, value: Iterable[Any] | str) -> None:
        self._settable("tags")
        self._tags = [value] if isinstance(value, str) else [str(tag) for tag in value]

    @property
    def autoflush(self) -> bool | int:
        """False (each push is written at once), True (held until the block
        ends) or N (written N at a time)."""
        if self._autoflush is None:
            return False
        return self._autoflush or True

    @autoflush.setter
    def autoflush(self, value: bool | int | None) -> None:
        if value is None or value is False:
            self._autoflush = None
        elif value is True:
            self._autoflush = 0
        elif isinstance(value, int) and value > 0:
            self._autoflush = value
        else:
            raise ValueError(f"autoflush must be True or a positive whole number of jobs, got {value!r}")

    def expires_in(self, duration: float | timedelta) -> Batch:
        """Keep the batch this long from its first block instead of 30 days; chainable."""
        self._settable("expires_in")
        self._expiry = _seconds(duration, "expires_in")
        return self

    @property
    def linger(self) -> int | None:
        """Seconds the batch stays after success (None: 24 hours)."""
        return self._linger

    @linger.setter
    def linger(self, value: float | timedelta) -> None:
        seconds = _seconds(value, "linger")
        if not self._mutable and not self._update(linger=str(seconds)):
            raise ValueError(f"batch {self.bid} does not exist (expired or deleted)")
        self._linger = seconds

    def _update(self, **fields: str) -> bool:
        args = [value for pair in fields.items() for value in pair]
        return bool(self._call("update", [keys.batch(self.bid)], args))

    def _call(self, script: str, keys_: list[str], args: list[Any]) -> Any:
        scripts = self.config.scripts
        if f"batches.{script}" not in scripts:
            raise wurk.PluginError("batches need the wurk-batches plugin, which is switched off in this configuration")
        return self.config.redis_pool.execute(lambda conn: scripts.call(f"batches.{script}", conn, keys_, args))

    # -- callbacks ---------------------------------------------------------------------

    def on(self, event: str, target: Any, options: Mapping[str, Any] | None = None) -> Batch:
        """Run ``target`` when ``event`` ("complete", "success" or "death")
        fires, with ``options`` round-tripped through JSON; chainable."""
        if event not in keys.EVENTS:
            raise ValueError(f"unknown batch event {event!r}; expected one of {', '.join(keys.EVENTS)}")
        if options is None:
            options = {}
        if not isinstance(options, Mapping):
            raise ValueError(f"callback options must be a dict, got {type(options).__name__}")
        try:
            entry = json.dumps([normalize_target(target), dict(options)], separators=(",", ":"))
        except TypeError as exc:
            raise ValueError(f"callback options must be JSON-serialisable (pass ids, not objects): {exc}") from None
        if self._mutable:
            self._callbacks[event].append(entry)
            return self
        # Fenced: sent again after a lost reply, the entry is not appended twice.
        ticket = fence.ticket()
        registered = self._call(
            "register",
            [keys.batch(self.bid), keys.marker(self.bid, event), ticket.key],
            [f"cb-{event}", entry, ticket.seq, ticket.ttl],
        )
        if registered == -1:
            raise ValueError(f"batch {self.bid} does not exist (expired or deleted): cannot register a callback")
        if registered == 0:
            self.config.logger.warning(
                "batch %s: %s already fired; the %s callback registered now will never run", self.bid, event, event
            )
        return self

    # -- adding jobs -------------------------------------------------------------------

    @contextmanager
    def jobs(self) -> Iterator[Batch]:
        """Every job pushed inside the block joins this batch::

        with batch.jobs():
            ImportRowJob.perform_async(1)

        A batch opened inside the block becomes this one's child. An empty
        block enqueues a no-op job, so the callbacks still fire.
        """
        enclosing = context.active()
        token = f"open:{os.urandom(8).hex()}"
        self._open(token, enclosing)
        frame = context.Frame(self, token, self._autoflush)
        entered = context.enter(frame)
        try:
            yield self
        finally:
            context.leave(entered)
            self._close(frame)

    def _open(self, token: str, enclosing: context.Frame | None) -> None:
        if not self._mutable:
            if not self._call("open", self._open_keys(None, []), [token, "reopen", self.bid, 0, 0, "", "{}"]):
                raise ValueError(f"batch {self.bid} does not exist (expired or deleted): cannot add jobs to it")
            return
        parent = enclosing.bid if enclosing is not None else None
        fields = {
            "description": self._description,
            "callback_queue": self._callback_queue,
            "callback_class": self._callback_class,
            "tags": json.dumps(self._tags),
            "parent_bid": parent,
            "linger": str(self._linger) if self._linger else None,
            **{f"cb-{event}": f"[{','.join(entries)}]" for event, entries in self._callbacks.items() if entries},
        }
        written = {name: value for name, value in fields.items() if value is not None}
        created = repr(wire.now_ms() / 1000.0)
        args = [token, "new", self.bid, created, self._expiry, parent or "", json.dumps(written)]
        if self._call("open", self._open_keys(parent, self._tags), args) == -1:
            raise ValueError(f"batch {self.bid} exists already")
        self._mutable = False
        self.parent_bid = parent
        if enclosing is not None:
            enclosing.added += 1  # a child is something added: the parent needs no empty marker

    def _open_keys(self, parent: str | None, tags: list[str]) -> list[str]:
        other = parent or self.bid
        return [
            keys.batch(self.bid),
            keys.jids(self.bid),
            keys.BATCHES,
            keys.batch(other),
            keys.kids(other),
            keys.pkids(other),
            *(keys.tag(tag) for tag in tags),
        ]

    def _close(self, frame: context.Frame) -> None:
        try:
            flush_held(self.config, frame)
            if frame.added == 0:
                self._push_empty(frame)
        finally:
            found, live, kids = self._call(
                "close", [keys.batch(self.bid), keys.jids(self.bid), keys.pkids(self.bid)], [frame.token]
            )
            # Under a testing mode nothing was counted, and nothing is acked,
            # so the batch must not fire on its own; unless the test opted
            # the batch middleware in, and its jobs were counted and acked.
            settled = found and live == 0 and kids == 0
            if settled and (not testing.enabled() or counted_under_testing()):
                Books.of(self.config).evaluate(self.bid)

    def _push_empty(self, frame: context.Frame) -> None:
        entered = context.enter(frame)
        try:
            Empty.set(queue=self._callback_queue).perform_async()
        finally:
            context.leave(entered)

    # -- the batch in Redis -------------------------------------------------------------

    def include(self, jid: str) -> bool:
        """Whether ``jid`` is still live in this batch (added, not yet succeeded nor dead)."""
        return bool(self.config.redis_pool.execute(lambda conn: conn.sismember(keys.jids(self.bid), jid)))

    def remove_jobs(self, *jids: str) -> int:
        """Take jobs out of the batch; how many were live (and so removed)."""
        if not jids:
            return 0
        self._call("update", [keys.batch(self.bid)], [])  # fails clearly when the plugin is off
        return Books.of(self.config).remove_jobs(self.bid, list(jids))

    def invalidate_all(self) -> None:
        """Call off this batch and every batch under it: their jobs still
        queued ack as successes without running (see ``valid``)."""
        pending = [self.bid]
        seen: set[str] = set()
        while pending:
            bid = pending.pop()
            if bid in seen:
                continue
            seen.add(bid)
            self._call("update", [keys.batch(bid)], ["invalidated", "1"])
            Books.of(self.config).forget(bid)
            pending += self._kids(bid)

    def _kids(self, bid: str) -> list[str]:
        kids: set[Any] = self.config.redis_pool.execute(lambda conn: conn.smembers(keys.kids(bid)))
        return [kid.decode() for kid in kids]

    @property
    def valid(self) -> bool:
        """False once ``invalidate_all`` ran on this batch or an ancestor."""
        return self.config.redis_pool.execute(lambda conn: conn.hget(keys.batch(self.bid), "invalidated")) != b"1"

    @property
    def status(self) -> statuses.Status:
        return statuses.Status(self.bid, config=self.config)

    @property
    def parent(self) -> Batch | None:
        """The parent batch, reopened; None for a batch at the top."""
        return Batch(self.parent_bid, config=self.config) if self.parent_bid else None
