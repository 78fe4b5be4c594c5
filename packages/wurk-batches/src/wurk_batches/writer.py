"""How a batch's jobs reach Redis: one Lua script per push that registers the
jid in the batch, counts it in ``total`` and ``pending``, and pushes the
payload, atomically, so that a batch's counters never disagree with its queue.

The writer claims every payload pushed by application code while a
``jobs`` block is open, and stamps it with the block's ``bid`` (a payload
that has one already keeps it), and every payload that carries a ``bid``
(a dead job retried from the dead set, a job pushed into a batch by hand).
It is not replayable: a batched push is never deferred to a commit nor held
in the outage buffer, since its counting cannot be repeated later.

Stamping here rather than in client middleware is deliberate: a batch's
jobs need no middleware, so a worker that has the plugin but no middleware
of its own keeps the reliable promoter's single atomic script. For the same
reason the writer takes no promotions (``origins``): a scheduled job was
counted when it was created, a retried one when it was first pushed, and
core's promoter moves them as it moves any job.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from wurk import Payload
from wurk.client import payload as wire
from wurk.client.writers import PUSH, PushWriter, push_core
from wurk.redis import fence
from wurk.redis import keys as core_keys
from wurk_batches import context
from wurk_batches import keys as bkeys
from wurk_batches.constants import DEFAULT_EXPIRY_SECONDS
from wurk_batches.middleware import counted_under_testing

if TYPE_CHECKING:
    from wurk.config.configuration import Config
    from wurk.redis.connection import RedisPool


class BatchWriter(PushWriter):
    name = "batches"
    replayable = False
    origins = (PUSH,)

    def __init__(self, config: Config) -> None:
        self.config = config

    def claims(self, payload: Mapping[str, Any], origin: str) -> bool:
        return origin == PUSH and (bool(payload.get("bid")) or context.active() is not None)

    def intercepted(self, payloads: list[Payload], origin: str) -> None:
        """A testing mode took these: each payload carries its ``bid``, as in
        production, and nothing is counted unless the test opted the batch
        middleware into the testing chain (then each is counted, not queued)."""
        frame = context.active()
        stamp(payloads, frame)
        if not counted_under_testing():
            return
        by_bid: dict[str, list[Payload]] = {}
        for payload in payloads:
            if payload.get("bid"):
                by_bid.setdefault(str(payload["bid"]), []).append(payload)
        for bid, jobs in by_bid.items():
            push_jobs(self.config, self.config.redis_pool, bid, jobs, queue=False)
            if frame is not None and frame.bid == bid:
                frame.added += len(jobs)

    def write(self, payloads: list[Payload], pool: RedisPool, origin: str) -> None:
        frame = context.active()
        stamp(payloads, frame)
        plain: list[Payload] = []
        by_bid: dict[str, list[Payload]] = {}
        for payload in payloads:
            bid = payload.get("bid")
            if not bid:  # not in a batch after all
                plain.append(payload)
                continue
            if frame is not None and frame.holds(payload):
                frame.held.append((payload, pool))
                continue
            by_bid.setdefault(str(bid), []).append(payload)
        if plain:
            push_core(self.config.scripts, pool, plain)
        for bid, jobs in by_bid.items():
            push_jobs(self.config, pool, bid, jobs)
            if frame is not None and frame.bid == bid:
                frame.added += len(jobs)
        if frame is not None and frame.full:
            flush_held(self.config, frame)


def stamp(payloads: list[Payload], frame: context.Frame | None) -> None:
    """Give each payload pushed inside the block the block's ``bid``."""
    if frame is None:
        return
    for payload in payloads:
        if not payload.get("bid"):
            payload["bid"] = frame.bid


def flush_held(config: Config, frame: context.Frame) -> None:
    """Write what an autoflush block holds, pool by pool, in push order."""
    while frame.held:
        pool = frame.held[0][1]
        jobs = [payload for payload, held_pool in frame.held if held_pool is pool]
        frame.held = [(payload, held_pool) for payload, held_pool in frame.held if held_pool is not pool]
        push_jobs(config, pool, frame.bid, jobs)
        frame.added += len(jobs)


def push_jobs(config: Config, pool: RedisPool, bid: str, jobs: list[Payload], *, queue: bool = True) -> int:
    """Push ``jobs`` of batch ``bid`` through the push script; how many were
    new to the batch. Stamps ``enqueued_at`` on the immediate ones, as core's
    writer does; a scheduled one goes to the ``schedule`` set without ``at``
    and ``enqueued_at``, which are stamped when it is promoted. With
    ``queue=False`` the jobs are counted and registered but not written
    (a testing mode runs or holds them instead).

    The call is fenced (``wurk.redis.fence``): sent again after a lost reply, it
    pushes and counts nothing more (and answers 0)."""
    ticket = fence.ticket()
    keys = [bkeys.batch(bid), bkeys.jids(bid), bkeys.died(bid), core_keys.QUEUES, core_keys.SCHEDULE, ticket.key]
    args: list[str | int | float] = [DEFAULT_EXPIRY_SECONDS, ticket.seq, ticket.ttl]
    now = wire.now_ms()
    for job in jobs:
        keys.append(core_keys.queue(job["queue"]))
        at = job.get("at")
        if at is None:
            job["enqueued_at"] = now
            encoded = wire.dumps(job)
        else:
            encoded = wire.dumps({key: value for key, value in job.items() if key not in ("at", "enqueued_at")})
        due = "-" if not queue else "" if at is None else repr(float(at))
        args += [job["jid"], job["queue"], due, encoded]
    scripts = config.scripts
    return int(pool.execute(lambda conn: scripts.send("batches.push", pool, keys, args)))
