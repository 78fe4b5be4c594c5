"""The batch's bookkeeping as jobs end: acks, and firing the callbacks.

Every change is one Lua script (see ``lua/``), so racing workers cannot
double-count, and every event fires at most once through a ``SET NX``
marker, in the same script that pushes its callback jobs. What needs a
decision across several batches (a death climbing the parent chain, a
finished child letting its parent go on) is walked here, one batch per
script call; each step is idempotent, so a worker killed halfway leaves
nothing that the job's next run, or the next ack, does not finish.

Callback jobs are pushed to the end of the callback queue that the next
fetch takes from, so they do not wait behind the queue's backlog
(``batch_callbacks_first``, on by default).
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any, TypeVar

import wurk
from wurk import testing
from wurk.client import payload as wire
from wurk.errors import LostReplyError
from wurk.redis import fence
from wurk.redis import keys as core_keys
from wurk_batches import keys
from wurk_batches.constants import (
    CALLBACK_JOB,
    CALLBACK_NOTIFY_TTL,
    DEFAULT_CALLBACK_QUEUE,
    DEFAULT_EXPIRY_SECONDS,
    POST_SUCCESS_EXPIRY_SECONDS,
)

if TYPE_CHECKING:
    from wurk.config.configuration import Config

T = TypeVar("T")

#: How often a firing is tried again when callbacks were registered meanwhile.
ATTEMPTS = 5
#: How long a worker trusts what it read of a batch's invalidation, seconds:
#: a batch's jobs then cost one round trip each (the ack), not two, and an
#: ``invalidate_all`` reaches jobs starting at most this much later.
INVALIDATION_CACHE_SECONDS = 1.0
CACHE_LIMIT = 10_000
GONE, STALE, UNFINISHED = 0, 1, 2


def _text(value: Any) -> str | None:
    return value.decode() if isinstance(value, bytes) else value


class Books:
    """The batch bookkeeping of one configuration (``Books.of(config)``)."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self._invalidated: dict[str, tuple[float, bool]] = {}

    @classmethod
    def of(cls, config: Any) -> Books:
        """The configuration's books; a capsule (a middleware's ``config``) leads to its configuration."""
        config = getattr(config, "config", None) or config
        books: Books = config.lookup("batches_books", cls)
        return books

    def _call(self, script: str, keys_: list[str], args: list[Any]) -> Any:
        # The pool's raw send path (no client object in between): an ack runs
        # once per batched job. ``execute`` still applies the retry rules.
        scripts, pool = self.config.scripts, self.config.redis_pool
        return pool.execute(lambda conn: scripts.send(f"batches.{script}", pool, keys_, args))

    # -- acks -------------------------------------------------------------------

    def invalidated(self, bid: str) -> bool:
        """Whether ``bid`` was invalidated, as read at most a second ago."""
        now = time.monotonic()
        cached = self._invalidated.get(bid)
        if cached is not None and cached[0] > now:
            return cached[1]
        answer = self.config.redis_pool.execute(lambda conn: conn.hget(keys.batch(bid), "invalidated")) == b"1"
        if len(self._invalidated) >= CACHE_LIMIT:
            self._invalidated.clear()
        self._invalidated[bid] = (now + INVALIDATION_CACHE_SECONDS, answer)
        return answer

    def forget(self, bid: str) -> None:
        """This process changed ``bid``'s invalidation: read it afresh next time."""
        self._invalidated.pop(bid, None)

    def ack_success(self, bid: str, jid: str) -> None:
        found, _booked, live, kids = self._call(
            "ack_success", [keys.batch(bid), keys.jids(bid), keys.failed(bid), keys.pkids(bid)], [jid]
        )
        # Even when this run was booked before (a job run again after its
        # worker died), look again: the earlier run may have died before firing.
        if found and live == 0 and kids == 0:
            self.evaluate(bid)

    def ack_failure(self, bid: str, jid: str) -> None:
        self._call("ack_failure", [keys.batch(bid), keys.failed(bid)], [jid, DEFAULT_EXPIRY_SECONDS])

    def ack_death(self, bid: str, jid: str) -> None:
        found, dead, live, kids = self._call(
            "ack_death",
            [keys.batch(bid), keys.jids(bid), keys.failed(bid), keys.died(bid), keys.pkids(bid)],
            [jid, DEFAULT_EXPIRY_SECONDS],
        )
        # ``dead`` also when the jid was booked dead before: by an earlier
        # telling, or by this very call whose reply was lost and that the
        # pool sent again. Death fires at most once whatever the number of calls.
        if found and dead:
            self.fire_death(bid)
        if found and live == 0 and kids == 0:
            self.evaluate(bid)

    def remove_jobs(self, bid: str, jids: list[str]) -> int:
        # A receipt of the count, so the call sent again after a lost reply
        # answers what it removed (and the batch is still looked at).
        ticket = fence.ticket()
        removed, live, kids = self._call(
            "remove_jobs",
            [keys.batch(bid), keys.jids(bid), keys.failed(bid), keys.pkids(bid), keys.removal_receipt(ticket.token)],
            [ticket.seq, ticket.ttl, *jids],
        )
        if removed and live == 0 and kids == 0:
            self.evaluate(bid)
        return int(removed)

    def callback_finished(self, bid: str, jid: str) -> None:
        """A complete or success callback job of ``bid`` ran (or died): once
        all of them have, a parent waiting on ``bid`` goes on."""
        parent = _text(self.config.redis_pool.execute(lambda conn: conn.hget(keys.batch(bid), "parent_bid")))
        if not parent:
            return
        if self._call("callback_done", [keys.callbacks_running(bid), keys.pkids(parent)], [jid, bid]):
            self.evaluate(parent)

    # -- firing -----------------------------------------------------------------

    def evaluate(self, bid: str | None) -> None:
        """Fire complete and success for ``bid`` if they are due, then look at
        each parent that this lets go on, up the chain."""
        seen: set[str] = set()
        while bid and bid not in seen:
            seen.add(bid)
            bid = self._fire(bid)

    def _fire(self, bid: str) -> str | None:
        """One batch's complete and success; the parent to look at next, if any."""
        for _ in range(ATTEMPTS):
            state = self._read(bid, "cb-complete", "cb-success")
            if state is None:
                return None
            fields, kids = state
            parent = fields["parent_bid"]
            queue = fields["callback_queue"] or DEFAULT_CALLBACK_QUEUE
            complete = self._payloads(bid, "complete", fields)
            success = self._payloads(bid, "success", fields)
            linger = _seconds(fields["linger"], POST_SUCCESS_EXPIRY_SECONDS)
            batch_keys = [
                keys.batch(bid),
                keys.jids(bid),
                keys.pkids(bid),
                keys.died(bid),
                keys.failed(bid),
                keys.kids(bid),
                keys.callbacks_running(bid),
                keys.marker(bid, "complete"),
                keys.marker(bid, "success"),
                core_keys.QUEUES,
                core_keys.queue(queue),
                keys.pkids(parent) if parent else keys.pkids(bid),
                *(keys.marker(kid, "success") for kid in kids),
            ]
            args = [
                bid,
                repr(time.time()),
                CALLBACK_NOTIFY_TTL,
                fields["cb-complete"] or "",
                fields["cb-success"] or "",
                queue,
                "1" if parent else "0",
                "1" if self.config["batch_callbacks_first"] else "0",
                linger,
                len(complete),
                *(value for pair in complete + success for value in pair),
            ]
            outcome, fired_complete, fired_success, go_on = self._call("fire", batch_keys, args)
            if outcome == STALE:
                continue
            if fired_complete or fired_success:
                events = [name for name, fired in (("complete", fired_complete), ("success", fired_success)) if fired]
                self.config.logger.info("batch %s: %s", bid, " and ".join(events))
                if testing.enabled() and counted_under_testing():
                    fired = (complete if fired_complete else []) + (success if fired_success else [])
                    self._hand_to_testing(queue, fired)
            return parent if go_on else None
        self.config.logger.warning("batch %s: callbacks kept changing while firing; left for the next ack", bid)
        return None

    def _hand_to_testing(self, queue: str, callbacks: list[tuple[str, str]]) -> None:
        """Move callback jobs the fire script queued into the testing mode.

        Under a testing mode whose test opted the batch middleware in, the
        callbacks must run inline or wait in the fake store like any job
        pushed there, not sit in the real queue where nothing works it.
        """
        client = wurk.Client(self.config)
        key = core_keys.queue(queue)
        pool = self.config.redis_pool
        for _jid, payload in callbacks:

            def take(conn: Any, payload: str = payload) -> int:
                return int(conn.lrem(key, 1, payload))

            def queued(conn: Any, payload: str = payload) -> bool:
                return conn.lpos(key, payload) is not None

            try:
                taken = bool(pool.execute(take, once=True))
            except LostReplyError:
                # Sent again, the removal would find nothing and leave the
                # callback nowhere. The payload (its jid is new) is this
                # call's alone: gone from the queue means taken.
                taken = not pool.execute(queued) or bool(pool.execute(take))
            if taken:
                client.raw_push([wire.loads(payload)])

    def fire_death(self, bid: str | None) -> None:
        """Fire death for ``bid`` and for every ancestor, each at most once ever."""
        seen: set[str] = set()
        while bid and bid not in seen:
            seen.add(bid)
            bid = self._fire_death(bid)

    def _fire_death(self, bid: str) -> str | None:
        for _ in range(ATTEMPTS):
            state = self._read(bid, "cb-death")
            if state is None:
                return None
            fields, _kids = state
            queue = fields["callback_queue"] or DEFAULT_CALLBACK_QUEUE
            payloads = self._payloads(bid, "death", fields)
            batch_keys = [
                keys.batch(bid),
                keys.marker(bid, "death"),
                keys.DEAD_BATCHES,
                core_keys.QUEUES,
                core_keys.queue(queue),
            ]
            first = "1" if self.config["batch_callbacks_first"] else "0"
            args = [bid, repr(time.time()), CALLBACK_NOTIFY_TTL, fields["cb-death"] or "", queue, first]
            outcome = self._call("fire_death", batch_keys, [*args, *(value for pair in payloads for value in pair)])
            if outcome == STALE:
                continue
            if outcome == 3:
                self.config.logger.info("batch %s: death", bid)
            return fields["parent_bid"]
        return None

    def _read(self, bid: str, *callbacks: str) -> tuple[dict[str, str | None], list[str]] | None:
        """The fields a firing needs and the children's bids; None when the batch is gone."""
        names = [*callbacks, "callback_queue", "callback_class", "parent_bid", "linger", "created_at"]

        def read(conn: Any) -> list[Any]:
            pipe = conn.pipeline(transaction=False)
            pipe.hmget(keys.batch(bid), names)
            pipe.smembers(keys.kids(bid))
            return list(pipe.execute())

        values, kids = self.config.redis_pool.execute(read)
        fields = dict(zip(names, (_text(value) for value in values), strict=True))
        if fields["created_at"] is None:
            return None
        return fields, sorted(_text(kid) or "" for kid in kids)

    def _payloads(self, bid: str, event: str, fields: dict[str, str | None]) -> list[tuple[str, str]]:
        """The callback jobs of ``event``, as (jid, payload JSON). An entry that
        cannot be made into a job is logged and skipped; the others still fire."""
        raw = fields.get(f"cb-{event}")
        if not raw:
            return []
        try:
            entries = json.loads(raw)
        except ValueError:
            self.config.logger.error("batch %s: the %s callbacks are not JSON; none fires", bid, event)
            return []
        queue = fields["callback_queue"] or DEFAULT_CALLBACK_QUEUE
        now = wire.now_ms()
        made: list[tuple[str, str]] = []
        for entry in entries if isinstance(entries, list) else []:
            try:
                target, options = entry
                if isinstance(target, str) and target.startswith("#") and fields["callback_class"]:
                    target = f"{fields['callback_class']}{target}"
                jid = wire.new_jid()
                job = {
                    "class": CALLBACK_JOB,
                    "args": [bid, event, target, options],
                    "queue": queue,
                    "retry": True,
                    "jid": jid,
                    "created_at": now,
                    "enqueued_at": now,
                }
                made.append((jid, wire.dumps(job)))
            except (TypeError, ValueError) as exc:
                self.config.handle_exception(exc, {"context": f"batch {bid}: enqueueing a {event} callback"})
        return made


#: The batch's server middleware class, entered by :func:`testing_opt_in` as
#: :mod:`wurk_batches.middleware` defines it: that module imports this one for
#: the books, so this one does not import it back. Until it is defined no test
#: can have added it to a chain, and nothing counts.
_opted_in: type | None = None


def testing_opt_in(klass: type[T]) -> type[T]:
    """Class decorator: ``klass`` is the middleware whose presence in
    ``wurk.testing.server_middleware`` :func:`counted_under_testing` looks for."""
    global _opted_in
    _opted_in = klass
    return klass


def counted_under_testing() -> bool:
    """Whether a test opted the batch middleware into ``wurk.testing.server_middleware``.

    The guides offer that opt-in to a test that wants acks and callbacks
    under a testing mode: the writer then counts each intercepted job in the
    batch (without queueing it), so the acks of its inline or drained runs
    bring the batch to its callbacks as a worker's would.
    """
    return _opted_in is not None and _opted_in in testing.server_middleware


def _seconds(value: str | None, default: int) -> int:
    try:
        seconds = int(float(value)) if value else default
    except ValueError:
        return default
    return seconds if seconds > 0 else default
