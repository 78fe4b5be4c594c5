"""How a batch's jobs reach Redis: one Lua script per push that registers the
jid in the batch, counts it in ``total`` and ``pending``, and pushes the
payload, atomically, so that a batch's counters never disagree with its queue.

The writer claims every payload pushed by application code that carries a
``bid`` (the client middleware stamps it inside a ``jobs`` block), and every
payload pushed while a block is open, which is how the transaction-aware
client, asking before the middleware ran, learns that such a push must not
wait for a commit. It is not replayable: a batched push is never deferred to
a commit nor held in the outage buffer, since its counting cannot be
repeated later. Promoted jobs (scheduled or retried) are left to core: a
scheduled job was counted when it was created, a retried one when it was
first pushed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from wurk import keys as core_keys
from wurk import payload as wire
from wurk.writers import PUSH, PushWriter, core_commands
from wurk_batches import context
from wurk_batches import keys as bkeys
from wurk_batches.constants import DEFAULT_EXPIRY_SECONDS

if TYPE_CHECKING:
    from wurk.config import Config
    from wurk.redis_pool import RedisPool

Payload = dict[str, Any]


class BatchWriter(PushWriter):
    name = "batches"
    replayable = False

    def __init__(self, config: Config) -> None:
        self.config = config

    def claims(self, payload: Mapping[str, Any], origin: str) -> bool:
        return origin == PUSH and (bool(payload.get("bid")) or context.active() is not None)

    def write(self, payloads: list[Payload], pool: RedisPool, origin: str) -> None:
        frame = context.active()
        plain: list[Payload] = []
        by_bid: dict[str, list[Payload]] = {}
        for payload in payloads:
            bid = payload.get("bid")
            if not bid:  # claimed inside a block, but no middleware stamped it
                plain.append(payload)
                continue
            if frame is not None and frame.holds(payload):
                frame.held.append((payload, pool))
                continue
            by_bid.setdefault(str(bid), []).append(payload)
        if plain:
            commands = core_commands(plain)
            pool.execute(lambda conn: pool.send(commands))
        for bid, jobs in by_bid.items():
            push_jobs(self.config, pool, bid, jobs)
            if frame is not None and frame.bid == bid:
                frame.added += len(jobs)
        if frame is not None and frame.full:
            flush_held(self.config, frame)


def flush_held(config: Config, frame: context.Frame) -> None:
    """Write what an autoflush block holds, pool by pool, in push order."""
    while frame.held:
        pool = frame.held[0][1]
        jobs = [payload for payload, held_pool in frame.held if held_pool is pool]
        frame.held = [(payload, held_pool) for payload, held_pool in frame.held if held_pool is not pool]
        push_jobs(config, pool, frame.bid, jobs)
        frame.added += len(jobs)


def push_jobs(config: Config, pool: RedisPool, bid: str, jobs: list[Payload]) -> int:
    """Push ``jobs`` of batch ``bid`` through the push script; how many were
    new to the batch. Stamps ``enqueued_at`` on the immediate ones, as core's
    writer does; a scheduled one goes to the ``schedule`` set without ``at``
    and ``enqueued_at``, which are stamped when it is promoted."""
    keys = [bkeys.batch(bid), bkeys.jids(bid), bkeys.died(bid), core_keys.QUEUES, core_keys.SCHEDULE]
    args: list[str | int | float] = [DEFAULT_EXPIRY_SECONDS]
    now = wire.now_ms()
    for job in jobs:
        keys.append(core_keys.queue(job["queue"]))
        at = job.get("at")
        if at is None:
            job["enqueued_at"] = now
            encoded = wire.dumps(job)
        else:
            encoded = wire.dumps({key: value for key, value in job.items() if key not in ("at", "enqueued_at")})
        args += [job["jid"], job["queue"], "" if at is None else repr(float(at)), encoded]
    scripts = config.scripts
    return int(pool.execute(lambda conn: scripts.call("batches.push", conn, keys, args)))
