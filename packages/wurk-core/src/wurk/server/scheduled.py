"""The scheduler: moves due jobs from ``retry`` and ``schedule`` onto their queues.

One poller thread per process. Its interval is random around
``process count × average_scheduled_poll_interval`` seconds, so the whole
fleet's scheduler traffic stays about constant as processes are added, and
it first waits ``scheduler_initial_wait`` (10 s) plus a little jitter, so a
fleet-wide deploy does not dogpile Redis.

Two promoters:

* :class:`Enq`, the default, pops one due job at a time with an atomic script
  and pushes it through the client (client middleware runs, ``enqueued_at``
  is fresh, the push writers see origin ``promote``). Between the pop and the
  push the job is only in this process's memory: a crash there loses it, and
  a failed push is reported with context ``scheduler_promote``. Both writes
  are fenced (:mod:`wurk.redis.fence`), so a lost reply neither skips a job nor
  pushes one twice.
* :class:`ReliableEnq` (``config.reliable_scheduler()``) never holds a job
  only in memory, 500 jobs per call. With no client middleware and no plugin
  push writer, one script pushes before it removes: a crash can at worst
  deliver a job twice. Otherwise one process at a time promotes each
  sorted set (a lock with a lease, checked by every write, so a paused
  holder's late write is refused): it reads the due members without
  removing them, runs each through the client middleware, and one script
  removes each member that is still there and pushes it. A crash before the
  script loses nothing; members a plugin push writer claims are written
  first and removed after, so a crash in between delivers them twice at
  worst.
"""

from __future__ import annotations

import random
import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any, cast

from redis.exceptions import ConnectionError as RedisPyConnectionError

from wurk.client import payload as wire
from wurk.client.push import Client
from wurk.client.writers import PROMOTE, PushWriter
from wurk.errors import RedisConnectionError
from wurk.plugins.component import Component
from wurk.redis import fence, keys
from wurk.server.retry import morgue
from wurk.types import Payload

if TYPE_CHECKING:
    from wurk.config.configuration import Config
    from wurk.redis.connection import RedisPool

SORTED_SETS = (keys.RETRY, keys.SCHEDULE)
PROMOTE_BATCH = 500
#: The chained promoter's lock lease, renewed by each script call: long enough
#: for one pass through the middleware, short enough that a crashed
#: promoter's lock is soon taken over.
PROMOTE_LEASE_MS = 30_000
INITIAL_JITTER = 5.0
CLEANUP_LOCK_SECONDS = 60
#: Where a member with no readable queue goes (as in core.promote).
DEFAULT_QUEUE = "default"


class Enq:
    def __init__(self, config: Config) -> None:
        self.config = config
        self.client = Client(config)
        self.done = False

    def enqueue_jobs(self, sorted_sets: tuple[str, ...] = SORTED_SETS) -> int:
        moved = 0
        for sorted_set in sorted_sets:
            while not self.done:
                popped = pop_lowest(self.config, self.config.redis_pool, sorted_set, repr(time.time()))
                if popped is None:
                    break
                if not self._push(sorted_set, *popped):
                    return moved  # Redis is failing: the next pass tries again
                moved += 1
        return moved

    def _push(self, sorted_set: str, member: bytes, score: float) -> bool:
        """Push one popped member through the client.

        A member the client refuses (not JSON, not UTF-8, a field of the
        wrong type) goes to the dead set as it is, where the dashboard shows
        it, instead of being dropped; a push that failed for lack of Redis
        puts the member back where it was, if Redis takes that, and ends the
        pass (False). Only a crash here, or Redis gone for both writes, loses
        it."""
        try:
            self.client.push(wire.loads(member), origin=PROMOTE)
            return True
        except Exception as exc:
            self.config.handle_exception(exc, {"context": "scheduler_promote", "job": member})
            outage = isinstance(exc, (RedisConnectionError, RedisPyConnectionError))
            pool = self.config.redis_pool
            try:
                if outage:
                    pool.execute(lambda conn: conn.zadd(sorted_set, {member: score}))
                else:
                    pool.execute(lambda conn: morgue(self.config, conn, member))
            except Exception as again:
                self.config.handle_exception(again, {"context": "scheduler_promote", "job": member})
            return not outage


@dataclass
class _Chained:
    """One read of due members, sorted by what becomes of each."""

    #: (member, queue, payload) for core's script; an empty payload was halted.
    #: A member is bytes when it is not UTF-8, and goes back byte for byte.
    entries: list[tuple[str | bytes, str, str | bytes]] = field(default_factory=list)
    #: Per plugin writer: (member, score, chained payload).
    claimed: dict[PushWriter, list[tuple[str | bytes, float, Payload]]] = field(default_factory=dict)
    #: Members left in place (their middleware raised), skipped by the next read.
    kept: int = 0


class ReliableEnq(Enq):
    def enqueue_jobs(self, sorted_sets: tuple[str, ...] = SORTED_SETS) -> int:
        # Without middleware or plugin writers taking promotions, nothing
        # needs the payload in Python: the single script is the cheapest and
        # fully atomic.
        atomic = not self.client.has_middleware and not self.client.writers.plugged_for(PROMOTE)
        moved = 0
        for sorted_set in sorted_sets:
            moved += self._promote_atomically(sorted_set) if atomic else self._promote_chained(sorted_set)
        return moved

    def _promote_atomically(self, sorted_set: str) -> int:
        moved = 0
        while not self.done:
            count = self._promote_due(sorted_set)
            moved += count
            if count < PROMOTE_BATCH:
                break
        return moved

    def _promote_due(self, sorted_set: str) -> int:
        """Move up to ``PROMOTE_BATCH`` due members of ``sorted_set`` onto their queues; how many."""
        now = time.time()
        return int(
            self.config.redis_pool.execute(
                lambda conn: self.config.scripts.call(
                    "core.promote", conn, [sorted_set, keys.QUEUES], [repr(now), int(now * 1000), PROMOTE_BATCH]
                )
            )
        )

    def _promote_chained(self, sorted_set: str) -> int:
        """Promote every due member through the client middleware; how many
        were pushed. Another process promoting this set now: nothing to do.

        One promoter at a time, because middleware decides with side effects
        (a unique lock, a limiter slot): two promoters chaining one member
        could both halt it, each on the other's lock, and the job would be
        removed by one and pushed by neither."""
        pool = self.config.redis_pool
        fence = _Fence(keys.promote_lock(sorted_set), secrets.token_hex(12))
        if not pool.execute(lambda conn: conn.set(fence.lock, fence.token, nx=True, px=PROMOTE_LEASE_MS)):
            return 0
        moved = skipped = 0
        try:
            while not self.done:
                due = pool.execute(partial(_read_due, sorted_set=sorted_set, offset=skipped))
                if not due:
                    break
                chained = self._chain(due)
                for writer, members in chained.claimed.items():
                    written, kept = self._hand_over(writer, members)
                    chained.entries += written
                    moved += len(written)
                    chained.kept += kept
                pushed = self._push_entries(sorted_set, fence, chained.entries)
                if pushed < 0:
                    break  # the lease ran out and someone else promotes now
                moved += pushed
                skipped += chained.kept
                if len(due) < PROMOTE_BATCH:
                    break
        finally:
            pool.execute(
                lambda conn: self.config.scripts.call("core.leader_release", conn, [fence.lock], [fence.token])
            )
        return moved

    def _chain(self, due: Sequence[tuple[bytes | str, float]]) -> _Chained:
        chained = _Chained()
        writers, pool = self.client.writers, self.config.redis_pool
        for raw, score in due:
            member = wire.exact(raw)
            item = _decoded(member)
            if item is None:
                # Like core.promote: what cannot be read still reaches a queue
                # (where the worker reports it) instead of looping here forever.
                queue = _queue_of(member)
                chained.entries.append((member, queue, member))
                continue
            try:
                payload = self.client._through_chain(item, pool)
            except Exception as exc:
                self.config.handle_exception(exc, {"context": "scheduler_promote", "job": raw})
                chained.kept += 1
                continue
            if payload is None:
                chained.entries.append((member, item["queue"], ""))
                continue
            writer = writers.claimant(payload, PROMOTE)
            if writer is writers.core:
                payload["enqueued_at"] = wire.now_ms()
                chained.entries.append((member, payload["queue"], wire.dumps(payload)))
            else:
                chained.claimed.setdefault(writer, []).append((member, score, payload))
        return chained

    def _push_entries(self, sorted_set: str, fence: _Fence, entries: list[tuple[str | bytes, str, str | bytes]]) -> int:
        """Run the promotion script on ``entries``; how many it pushed, or -1
        when the lock is no longer ours (then it did nothing)."""
        if not entries:
            return 0
        queues = [keys.queue(queue) for _, queue, _ in entries]
        args = [fence.token, PROMOTE_LEASE_MS, *(value for entry in entries for value in entry)]
        return int(
            self.config.redis_pool.execute(
                lambda conn: self.config.scripts.call(
                    "core.promote_chained", conn, [sorted_set, keys.QUEUES, fence.lock, *queues], args
                )
            )
        )

    def _hand_over(
        self, writer: PushWriter, members: list[tuple[str | bytes, float, Payload]]
    ) -> tuple[list[tuple[str | bytes, str, str | bytes]], int]:
        """Give a plugin writer its members before they leave the sorted set:
        the entries that remove them once written (nothing left to push), and
        how many stay for a later pass because the write failed. A crash
        between the write and the removal delivers them twice at worst."""
        try:
            writer.write([payload for _, _, payload in members], self.config.redis_pool, PROMOTE)
        except Exception as exc:
            self.config.handle_exception(exc, {"context": "scheduler_promote", "writer": writer.name})
            return [], len(members)
        return [(member, payload["queue"], "") for member, _, payload in members], 0


@dataclass(frozen=True)
class _Fence:
    """The promotion lock of one sorted set, and the token that says it is ours."""

    lock: str
    token: str


def pop_lowest(config: Config, pool: RedisPool, sorted_set: str, due: str = "+inf") -> tuple[bytes, float] | None:
    """Remove the lowest-scored member of ``sorted_set`` scored at most
    ``due``; it and its score, or ``None``.

    The pop is fenced: if its reply is lost and the pool sends it again, the
    script hands back the member the first call took instead of taking the
    next one, which would then be in no key at all."""
    ticket = fence.ticket()
    script_keys = [sorted_set, keys.pop_receipt(ticket.token)]
    args: list[str | int] = [due, ticket.seq, ticket.ttl]
    popped = pool.execute(lambda conn: config.scripts.call("core.zpopbyscore", conn, script_keys, args))
    if not popped:
        return None
    member, score = popped
    return member, float(score)


def _read_due(conn: Any, *, sorted_set: str, offset: int) -> list[tuple[bytes, float]]:
    """Up to ``PROMOTE_BATCH`` due members with their scores, left in place;
    ``offset`` skips the ones an earlier read of this pass had to keep."""
    return list(
        conn.zrangebyscore(sorted_set, "-inf", repr(time.time()), start=offset, num=PROMOTE_BATCH, withscores=True)
    )


def _decoded(member: str | bytes) -> Payload | None:
    """The member as a payload the client middleware can take, or ``None``."""
    try:
        item = wire.loads(member)
    except ValueError:
        return None
    if not isinstance(item, dict) or not isinstance(item.get("class"), str) or not isinstance(item.get("queue"), str):
        return None
    return cast("Payload", item)  # read back from Redis: Wurk's own write, or Ruby's


def _queue_of(member: str | bytes) -> str:
    """Where core.promote would send a member that is not a payload."""
    try:
        item = wire.loads(member)
    except ValueError:
        return DEFAULT_QUEUE
    queue = item.get("queue") if isinstance(item, dict) else None
    return queue if isinstance(queue, str) else DEFAULT_QUEUE


class Poller(Component):
    name = "wurk-scheduler"
    context = "scheduler"

    def __init__(self, config: Config) -> None:
        super().__init__(config)
        self.enq: Enq = ReliableEnq(config) if config.option("scheduled_enq") == "reliable" else Enq(config)
        self._cleaned = False

    def quiet(self) -> None:
        """A quiet process promotes nothing more: its jobs would run elsewhere
        anyway, and the promotion is the one write that can lose a job."""
        self.request_stop()

    def wake(self) -> None:
        self.enq.done = True

    def first_wait(self) -> float:
        return self.initial_wait()

    def next_wait(self) -> float:
        return self.random_interval()

    def tick(self) -> None:
        if not self._cleaned:
            self._cleaned = True
            self.cleanup_processes()
        self.enq.enqueue_jobs()

    def average(self) -> float:
        configured = self.config.option("poll_interval_average")
        if configured:
            return float(configured)
        count = max(self._process_count(), 1)
        return count * float(self.config.option("average_scheduled_poll_interval", 5))

    def _process_count(self) -> int:
        try:
            return int(self.config.redis_pool.execute(lambda conn: conn.scard(keys.PROCESSES)))
        except Exception:
            return 1

    def initial_wait(self) -> float:
        configured = self.config.option("poll_interval_average")
        base = 0.0 if configured else float(self.config.option("scheduler_initial_wait", 10))
        return base + random.uniform(0, min(INITIAL_JITTER, self.average()))

    def random_interval(self) -> float:
        average = self.average()
        if self._process_count() < 10:
            return random.uniform(average / 2, average * 1.5)
        return random.uniform(0, average * 2)

    def cleanup_processes(self) -> int:
        """Drop ``processes`` members whose heartbeat hash expired (once a minute, fleet-wide)."""
        try:
            return cleanup_processes(self.config.redis_pool.client)
        except Exception as exc:
            self.config.handle_exception(exc, {"context": "process cleanup"})
            return 0


def cleanup_processes(conn: Any) -> int:
    if not conn.set(keys.PROCESS_CLEANUP, "1", nx=True, ex=CLEANUP_LOCK_SECONDS):
        return 0
    members = list(conn.sscan_iter(keys.PROCESSES))
    if not members:
        return 0
    pipe = conn.pipeline(transaction=False)
    for member in members:
        pipe.hget(member, "info")
    infos = pipe.execute()
    gone = [member for member, info in zip(members, infos, strict=True) if info is None]
    if gone:
        conn.srem(keys.PROCESSES, *gone)
    return len(gone)
