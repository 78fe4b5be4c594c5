"""Firing a loop: moving its marks, enqueueing its job, recording the fire.

A fire first moves the loop's marks with one script that refuses when the
``nf`` it read has changed or a newer leader exists, and only then pushes:
two pollers that both think they lead for a moment cannot both enqueue one
tick. The price is at-most-once: a push that fails after the marks moved is
reported and that tick is not retried (as a missed tick is never backfilled).

What a fire pushes depends on what the class name resolves to:

* a ``wurk.Job`` (or a name this process does not know, for a worker in
  another language): the plain Sidekiq payload ``class``/``args``/``queue``/
  ``retry`` with the loop's values;
* a task in the ``django.tasks`` style (an object with ``using(queue_name=)``
  and ``enqueue(*args)``, found in the application's own packages): it is
  enqueued through its own API, as the guides do for ActiveJob, so its
  backend serialises the arguments. ``retry`` is then ignored (the task's own
  rules govern retries), and the queue is only overridden when the loop set
  one other than ``"default"``.
"""

from __future__ import annotations

import importlib
import time
from typing import TYPE_CHECKING, Any

from wurk import Client
from wurk.client.registry import UnknownJobError
from wurk.redis import fence
from wurk.redis import keys as core_keys
from wurk_cron import keys
from wurk_cron.loop import DEFAULT_QUEUE, Loop, history_row, parse_history_row
from wurk_cron.manager import periodic_service
from wurk_cron.parser import Parser
from wurk_cron.registry import LoopSet

if TYPE_CHECKING:
    import redis

    from wurk.config.configuration import Config

__all__ = ["advance", "enqueue", "enqueue_now", "fire", "history", "pause", "resolve_target", "unpause"]


def _default(config: Config | None) -> Config:
    """``config``, else the one running this code (see :func:`wurk.current_config`)."""
    if config is None:
        from wurk import current_config

        return current_config()
    return config


def advance(
    config: Config, lid: str, *, expected: str, next_fire: int | None, fired_at: int, token: int | None, mode: str
) -> bool:
    """Run ``cron.advance`` (see its header); whether the marks moved."""
    ticket = fence.ticket()
    args: list[str | int] = [expected, "" if next_fire is None else next_fire, fired_at, "" if token is None else token]
    args += [mode, ticket.seq, ticket.ttl]
    script_keys = [keys.loop(lid), core_keys.LEADER_TOKEN, ticket.key]
    moved = config.redis_pool.execute(lambda conn: config.scripts.call("cron.advance", conn, script_keys, args))
    return bool(moved)


def record(config: Config, lid: str, fired_at: int, jid: str) -> None:
    """Add a fire to ``lid``'s history (fenced: a lost reply sent again adds nothing)."""
    ticket = fence.ticket()
    script_keys = [keys.history(lid), ticket.key]
    args: list[str | int] = [history_row(fired_at, jid), keys.HISTORY_SIZE, ticket.seq, ticket.ttl]
    config.redis_pool.execute(lambda conn: config.scripts.call("cron.record", conn, script_keys, args))


# -- what a class name stands for ------------------------------------------------


def is_task(target: object) -> bool:
    """Whether ``target`` is a ``django.tasks``-style task (not a job class)."""
    return (
        not isinstance(target, type)
        and callable(getattr(target, "enqueue", None))
        and callable(getattr(target, "using", None))
    )


def resolve_target(config: Config, name: str) -> Any:
    """The job class or task ``name`` stands for; UnknownJobError if none.

    A task is looked up only inside the packages job lookup may import
    (``config.jobs.allowed``), for the same reason job classes are: a name
    read from Redis must never choose what this process imports.
    """
    try:
        return config.jobs.resolve(name)
    except UnknownJobError:
        task = _find_task(config, name)
        if task is None:
            raise
        return task


def _find_task(config: Config, name: str) -> Any:
    parts = name.split(".")
    allowed = config.jobs.allowed
    for cut in range(len(parts) - 1, 0, -1):
        module_name = ".".join(parts[:cut])
        if not any(module_name == p or module_name.startswith(p + ".") for p in allowed):
            return None
        try:
            target: Any = importlib.import_module(module_name)
        except ImportError:
            continue
        for attribute in parts[cut:]:
            target = getattr(target, attribute, None)
        return target if is_task(target) else None
    return None


def enqueue(config: Config, loop: Loop) -> str | None:
    """Push one run of ``loop``; the jid (a task's result id), or None when
    a client middleware halted the push."""
    try:
        target = resolve_target(config, loop.klass)
    except UnknownJobError:
        target = None  # run by a worker that knows the name (another language)
    if target is not None and is_task(target):
        queue = loop.options.get("queue")
        if queue and queue != DEFAULT_QUEUE:
            target = target.using(queue_name=queue)
        result = target.enqueue(*loop.args)
        return str(getattr(result, "id", result))
    return Client(config).push(loop.payload())


# -- operations on one loop --------------------------------------------------------


def fire(lid: str, *, config: Config | None = None, now: float | None = None) -> str | None:
    """Fire ``lid`` now, bypassing the leader gate and the due check.

    Enqueues, records the fire in the history and advances the marks exactly
    like a tick. Returns the jid, or None for an unknown lid.
    """
    config = _default(config)
    loop = LoopSet(config).fetch(lid)
    if loop is None:
        return None
    moment = time.time() if now is None else now
    zone = periodic_service(config).zones.zone(loop.tz_name)
    following = Parser(loop.schedule).next_fire_at(moment, zone)
    fired_at = int(moment)
    if not advance(config, lid, expected="*", next_fire=following, fired_at=fired_at, token=None, mode="force"):
        return None  # unregistered between the read and the fire
    jid = enqueue(config, loop)
    if jid is not None:
        record(config, lid, fired_at, jid)
    return jid


def enqueue_now(lid: str, *, config: Config | None = None) -> str | None:
    """Push one run of ``lid`` now without touching its marks or history."""
    config = _default(config)
    loop = LoopSet(config).fetch(lid)
    return None if loop is None else enqueue(config, loop)


def pause(lid: str, *, config: Config | None = None) -> bool:
    """Pause ``lid``: the poller skips it until unpaused. Whether it exists."""
    return _set_paused(_default(config), lid, True)


def unpause(lid: str, *, config: Config | None = None, now: float | None = None) -> bool:
    """Resume ``lid`` from its next fire after now: a slot that passed while
    paused is not fired late."""
    config = _default(config)
    loop = LoopSet(config).fetch(lid)
    if loop is None:
        return False
    zone = periodic_service(config).zones.zone(loop.tz_name)
    following = Parser(loop.schedule).next_fire_at(time.time() if now is None else now, zone)
    advance(config, lid, expected="*", next_fire=following, fired_at=0, token=None, mode="mark")
    return _set_paused(config, lid, False)


def _set_paused(config: Config, lid: str, paused: bool) -> bool:
    def write(conn: redis.Redis) -> bool:
        if not conn.sismember(keys.PERIODIC, lid):
            return False
        conn.hset(keys.loop(lid), keys.PAUSED, "1" if paused else "0")
        return True

    return bool(config.redis_pool.execute(write))


def history(lid: str, *, config: Config | None = None) -> list[tuple[int, str]]:
    """The last fires of ``lid``, newest first, as ``(fired_at, jid)``."""
    config = _default(config)
    rows = config.redis_pool.execute(lambda conn: conn.lrange(keys.history(lid), 0, -1))
    return [parse_history_row(row) for row in rows]
