"""Push writers: the last step of every push, where a payload reaches Redis.

Every write path — ``Client.push`` and ``push_bulk``, the transaction-aware
client, the outage buffer's replay and both scheduled-job promoters — hands
its payloads, after the client middleware, to :meth:`PushWriterRegistry.route`.
Each payload goes to the first plugin writer that claims it, and to core's own
pipelined write (:class:`CoreWriter`) otherwise. A feature whose bookkeeping
must happen in the same round trip as the push (an account counting its jobs)
writes its payloads itself, through one Lua script, without core knowing
anything about it::

    class LedgerWriter(wurk.client.writers.PushWriter):
        name = "ledger"
        replayable = False  # counted at push time: never buffer nor defer

        def claims(self, payload, origin):
            return "ledger" in payload

        def write(self, payloads, pool, origin):
            ...  # one script: count the jobs, then SADD queues + LPUSH

    @wurk.hookimpl
    def wurk_register_push_writers(writers, config):
        writers.add(LedgerWriter())

See ``docs/push-writers.md`` for a complete one.

A writer whose payloads are not *replayable* is never held back: the outage
buffer raises :class:`~wurk.client.outage.NotReplayableError` instead of buffering
them, and the transaction-aware client pushes them at once instead of waiting
for the commit.

With no plugin writer registered, routing is one attribute read: a push costs
what it cost before writers existed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from wurk.client import payload as wire
from wurk.errors import LostReplyError, NotReplicatedError, PluginError, RedisConnectionError
from wurk.redis import fence, keys
from wurk.types import Payload

if TYPE_CHECKING:
    from wurk.config.configuration import Config
    from wurk.redis.connection import RedisPool
    from wurk.redis.scripts import ScriptRegistry


#: A push from application code: ``push``, ``push_bulk``, the transaction-aware client.
PUSH = "push"
#: A scheduled or retried job moved onto its queue by a scheduler promoter.
PROMOTE = "promote"
ORIGINS = (PUSH, PROMOTE)

#: The service name under which a configuration keeps its registry.
SERVICE = "push_writers"


class PushWriter:
    """One way of writing payloads to Redis; subclass it and register an
    instance through ``wurk_register_push_writers``.

    ``claims`` is asked once per payload, after the client middleware ran, so
    it must be cheap and must not change the payload. ``write`` receives the
    claimed payloads of one push (many for a bulk push), in push order, and
    must write all of them or raise: a transient connection error lets the
    outage buffer keep replayable payloads for later, anything else reaches
    the caller. ``enqueued_at`` is the writer's to stamp, since only it knows
    when the job reaches its queue; a payload with ``at`` is a scheduled job.
    """

    #: Names the writer in errors ("nothing was pushed for writer 'accounts'").
    name: str = ""
    #: False when a payload cannot be written later than its push (its
    #: bookkeeping happened at push time): never buffered, never deferred.
    replayable: bool = True
    #: The origins whose payloads this writer may claim. A write path whose
    #: origin no writer takes is core's alone: a writer that never claims a
    #: promotion (``origins = (PUSH,)``) leaves the reliable promoter its
    #: single atomic script.
    origins: tuple[str, ...] = ORIGINS

    def claims(self, payload: Mapping[str, Any], origin: str) -> bool:
        """Whether this writer writes ``payload`` (``origin`` is :data:`PUSH`
        or :data:`PROMOTE`)."""
        return False

    def write(self, payloads: list[Payload], pool: RedisPool, origin: str) -> None:
        raise NotImplementedError(f"push writer {self.name!r} claims payloads but does not write them")

    def intercepted(self, payloads: list[Payload], origin: str) -> None:
        """A testing mode (``fake``, ``inline``) took these payloads instead of
        Redis; called before an inline run, so bookkeeping that ``write``
        would have done can be kept in memory and seen by the job."""


#: What reads the ``durable_push`` setting at each push: ``None`` (off) or
#: its normal form, ``{"replicas": n, "timeout_ms": t}``.
Durability = Callable[[], "Mapping[str, int] | None"]


def _off() -> None:
    return None


class CoreWriter(PushWriter):
    """Core's own write, one round trip per push: ``ZADD schedule`` for the
    scheduled payloads; ``SADD queues`` and one ``LPUSH`` per queue for the
    rest, in one fenced script (``core.push``), so that a push sent again
    after a lost reply is not applied twice. With ``durable_push`` on, a
    push from application code also waits for the replicas."""

    name = "core"

    def __init__(self, scripts: ScriptRegistry | None = None, durability: Durability = _off) -> None:
        self.scripts = scripts
        self.durability = durability

    def claims(self, payload: Mapping[str, Any], origin: str) -> bool:
        return True

    def write(self, payloads: list[Payload], pool: RedisPool, origin: str) -> None:
        if self.scripts is None:
            raise PluginError("core's push writer was built without the configuration's scripts")
        # A promotion moves a job that is in Redis already: if the move is
        # lost in a failover, the job is still in its set and moves again.
        push_core(self.scripts, pool, payloads, (self.durability() or None) if origin == PUSH else None)


#: A push whose payloads come to at most this many bytes goes as a pipeline
#: with its fence written last; a larger one as the ``core.push`` script.
PIPELINED_BYTES = 8192
#: Lost replies a push takes, each looked up and found not applied, before it
#: gives up as unsettled.
LOST_REPLY_ATTEMPTS = 3


def push_core(
    scripts: ScriptRegistry,
    pool: RedisPool,
    payloads: Sequence[Payload],
    durable: Mapping[str, int] | None = None,
) -> None:
    """Write ``payloads`` as core does, in one round trip, fenced so that a
    push whose reply is lost is looked up and never applied twice. Stamps
    ``enqueued_at`` on the immediate payloads, in place.

    ``durable`` (the ``durable_push`` setting): the push returns only once
    ``replicas`` replicas hold it, and raises :class:`NotReplicatedError`
    when they do not confirm within ``timeout_ms``. The small push's
    pipeline ends with the ``WAIT``, at no extra round trip; the script and
    a push whose reply was lost take one more, the ``core.replicated``
    barrier (see :func:`_replicated`).

    A small push (one job, a few) is a plain pipeline whose last command
    sets the thread's fence: the server runs a connection's commands in
    order, so a fence that holds the push's number means the whole push was
    applied, and one that does not means it is safe to send again. That
    costs a ``SET`` where a script would cost a fifth of the push's time.
    A large push runs as the ``core.push`` script instead: all or nothing,
    however many packets it spans."""
    ticket = fence.ticket()
    pairs, by_queue = _grouped(payloads)
    size = sum(len(member) for member in pairs[1::2]) + sum(len(job) for jobs in by_queue.values() for job in jobs)
    pipelined = size <= PIPELINED_BYTES
    if pipelined:
        commands = [*_commands(pairs, by_queue), ("SET", ticket.key, ticket.seq, "EX", ticket.ttl)]
        if durable is not None:
            commands.append(("WAIT", durable["replicas"], durable["timeout_ms"]))
        write: Callable[[Any], Any] = lambda conn: pool.send(commands)  # noqa: E731
    else:
        script_keys = [ticket.key, keys.QUEUES, keys.SCHEDULE, *(keys.queue(queue) for queue in by_queue)]
        args: list[Any] = [ticket.seq, ticket.ttl, len(pairs) // 2, *pairs]
        for queue, encoded in by_queue.items():
            args += [queue, len(encoded), *encoded]
        write = lambda conn: scripts.send("core.push", pool, script_keys, args)  # noqa: E731
    try:
        replies = _write_fenced(pool, ticket, write)
        if durable is not None:
            _await_replicas(scripts, pool, ticket, write, payloads, durable, replies if pipelined else None)
    except RedisConnectionError as exc:
        fence.retire()
        exc.unsettled = fence.Unsettled(ticket, pool)
        raise


def _write_fenced(pool: RedisPool, ticket: fence.Ticket, write: Callable[[Any], Any]) -> Any:
    """Send ``write`` once; after a lost reply, send it again only if its
    fence says it was not applied. The write's reply, or None when it was
    lost and the fence says the write was applied."""
    for attempt in range(1, LOST_REPLY_ATTEMPTS + 1):
        try:
            return pool.execute(write, once=True)
        except LostReplyError:
            if fence.applied(pool, ticket):
                return None
            if attempt == LOST_REPLY_ATTEMPTS:
                raise
    return None  # not reached: the last attempt returns or raises


def _await_replicas(
    scripts: ScriptRegistry,
    pool: RedisPool,
    ticket: fence.Ticket,
    write: Callable[[Any], Any],
    payloads: Sequence[Payload],
    durable: Mapping[str, int],
    replies: Any,
) -> None:
    """Raise unless ``durable["replicas"]`` replicas confirmed the push.

    ``replies`` are the pipeline's, whose last one is its ``WAIT``'s count;
    without them (the script's push, a lost reply) the count comes from the
    barrier. A barrier that finds the push missing means a failover lost it
    after the old primary took it: it is pushed again on the new primary,
    whose fence does not know it, so it is not pushed twice."""
    for _ in range(LOST_REPLY_ATTEMPTS):
        confirmed = int(replies[-1]) if replies is not None else _replicated(scripts, pool, ticket, durable)
        if confirmed is None:
            replies = _write_fenced(pool, ticket, write)
            replies = replies if isinstance(replies, list) else None  # a script's reply is no count
            continue
        if confirmed < durable["replicas"]:
            raise _not_replicated(pool, payloads, confirmed, durable)
        return
    raise _not_replicated(pool, payloads, 0, durable)


def _not_replicated(
    pool: RedisPool, payloads: Sequence[Payload], confirmed: int, durable: Mapping[str, int]
) -> NotReplicatedError:
    from wurk.redis.connection import mask_url

    jids = [str(job.get("jid")) for job in payloads]
    return NotReplicatedError(mask_url(pool.url), jids, confirmed, durable["replicas"], durable["timeout_ms"])


def await_replicas_after(pool: RedisPool, payloads: Sequence[Payload], durable: Mapping[str, int]) -> None:
    """A durable push's wait for a plugin writer's write, which core cannot
    fence: a ``SET`` of a fresh fence and a ``WAIT`` on one connection, sent
    once, right after the write returned. The ``SET`` gives the ``WAIT`` a
    write that follows the plugin's in the server's stream. It is not
    retried: a reconnect might reach a primary promoted since, whose replicas
    would confirm a write that never reached it. A connection error here
    raises as itself, the push's durability unknown."""
    ticket = fence.ticket()
    barrier = [("SET", ticket.key, ticket.seq, "EX", ticket.ttl), ("WAIT", durable["replicas"], durable["timeout_ms"])]
    try:
        confirmed = int(pool.send(barrier)[-1])
    except Exception as exc:
        from wurk.redis.connection import UNREACHABLE, mask_url

        if isinstance(exc, UNREACHABLE):
            raise RedisConnectionError(mask_url(pool.url), exc) from exc
        raise
    if confirmed < durable["replicas"]:
        raise _not_replicated(pool, payloads, confirmed, durable)


def _replicated(
    scripts: ScriptRegistry, pool: RedisPool, ticket: fence.Ticket, durable: Mapping[str, int]
) -> int | None:
    """How many replicas hold the push of ``ticket``, by the ``core.replicated``
    barrier and a ``WAIT`` on one connection; None when the push is not on
    the server at all. Safe to send again: it writes nothing but a TTL."""
    # EVAL, not EVALSHA: the barrier is rare (a large push, a lost reply),
    # and a primary promoted a moment ago may not have the script cached.
    source = scripts["core.replicated"].source
    barrier = [
        ("EVAL", source, 1, ticket.key, ticket.seq, ticket.ttl),
        ("WAIT", durable["replicas"], durable["timeout_ms"]),
    ]
    present, confirmed = pool.execute(lambda conn: pool.send(barrier))
    return int(confirmed) if present else None


def core_commands(payloads: Sequence[Payload]) -> list[tuple[Any, ...]]:
    """Core's write as plain commands, for a plugin writer that sends them
    in a transaction of its own (they are not fenced: a lost reply sent
    again pushes twice). Stamps ``enqueued_at`` on the immediate payloads."""
    return _commands(*_grouped(payloads))


def _commands(pairs: list[Any], by_queue: dict[str, list[str]]) -> list[tuple[Any, ...]]:
    commands: list[tuple[Any, ...]] = []
    if pairs:
        commands.append(("ZADD", keys.SCHEDULE, *pairs))
    if by_queue:
        commands.append(("SADD", keys.QUEUES, *by_queue))
        commands += [("LPUSH", keys.queue(queue), *encoded) for queue, encoded in by_queue.items()]
    return commands


def _grouped(payloads: Sequence[Payload]) -> tuple[list[Any], dict[str, list[str]]]:
    """The scheduled payloads as score/member pairs, and the immediate ones
    encoded by queue, stamped with ``enqueued_at`` as they reach it."""
    pairs: list[Any] = []
    by_queue: dict[str, list[str]] = {}
    now: int | None = None
    for job in payloads:
        if job.get("at") is not None:
            # A scheduled member carries neither: ``at`` is its score and
            # ``enqueued_at`` is stamped when it is promoted.
            member = {key: value for key, value in job.items() if key not in ("at", "enqueued_at")}
            pairs += [float(job["at"]), wire.dumps(member)]
            continue
        if now is None:
            now = wire.now_ms()
        job["enqueued_at"] = now
        by_queue.setdefault(job["queue"], []).append(wire.dumps(job))
    return pairs, by_queue


class PushWriterRegistry:
    """The writers of one configuration, asked in registration order."""

    def __init__(self, scripts: ScriptRegistry | None = None, durability: Durability = _off) -> None:
        self.core: PushWriter = CoreWriter(scripts, durability)
        self._writers: list[PushWriter] = []

    def add(self, writer: PushWriter) -> None:
        if not isinstance(writer, PushWriter):
            raise PluginError(f"a push writer must subclass wurk.client.writers.PushWriter, got {writer!r}")
        if not isinstance(writer.name, str) or not writer.name:
            raise PluginError(f"push writer {writer!r} needs a name")
        if writer.name == self.core.name or any(known.name == writer.name for known in self._writers):
            raise PluginError(f"a push writer named {writer.name!r} is already registered")
        unknown = [origin for origin in writer.origins if origin not in ORIGINS]
        if unknown:
            raise PluginError(f"push writer {writer.name!r} names unknown origins {unknown}; known: {list(ORIGINS)}")
        self._writers.append(writer)

    @property
    def plugged(self) -> bool:
        """Whether any plugin writer is registered (if not, everything is core's)."""
        return bool(self._writers)

    def plugged_for(self, origin: str) -> bool:
        """Whether any plugin writer may claim payloads pushed from ``origin``."""
        return any(origin in writer.origins for writer in self._writers)

    def names(self) -> list[str]:
        return [writer.name for writer in self._writers]

    def claimant(self, payload: Mapping[str, Any], origin: str) -> PushWriter:
        """The writer of ``payload``: the first plugin writer that claims it, else core's."""
        for writer in self._writers:
            if origin in writer.origins and writer.claims(payload, origin):
                return writer
        return self.core

    def route(self, payloads: Sequence[Payload], origin: str) -> list[tuple[PushWriter, list[Payload]]]:
        """``payloads`` grouped by writer, push order kept within each group,
        the groups in the order of their first payload."""
        if not self._writers:
            return [(self.core, list(payloads))]
        groups: dict[int, tuple[PushWriter, list[Payload]]] = {}
        for payload in payloads:
            writer = self.claimant(payload, origin)
            group = groups.get(id(writer))
            if group is None:
                group = groups[id(writer)] = (writer, [])
            group[1].append(payload)
        return list(groups.values())


def _build(config: Config) -> PushWriterRegistry:
    registry = PushWriterRegistry(config.scripts, lambda: config["durable_push"])
    config.plugins.call.register_push_writers(registry, config)
    return registry


def writers_for(config: Config) -> PushWriterRegistry:
    """The configuration's registry, built on first use from the plugins'
    ``wurk_register_push_writers`` hooks. Like the script registry, it is
    built once: a plugin registered after the first push adds no writer."""
    registry: PushWriterRegistry = config.lookup(SERVICE, _build)
    return registry


__all__ = [
    "ORIGINS",
    "PROMOTE",
    "PUSH",
    "CoreWriter",
    "PushWriter",
    "PushWriterRegistry",
    "await_replicas_after",
    "core_commands",
    "push_core",
    "writers_for",
]
