"""The client: everything that puts a job into Redis goes through here.

``push`` and ``push_bulk`` normalise and check the item, run the client
middleware chain per job (a falsy return halts that job's push), and hand the
survivors to ``raw_push``, the single point where the testing modes and the
outage buffer intercept and where each payload is routed to its push writer
(:mod:`wurk.client.writers`). Core's own writer makes an immediate push one pipeline
(``SADD queues`` and one ``LPUSH`` per queue) and a scheduled one one
``ZADD schedule``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from wurk.client import fields, interception
from wurk.client import payload as wire
from wurk.client.payload import InvalidJobError
from wurk.client.writers import PUSH, PushWriter, PushWriterRegistry, await_replicas_after, writers_for
from wurk.config import shards
from wurk.types import Payload

if TYPE_CHECKING:
    from wurk.client.middleware import Chain
    from wurk.config.configuration import Config
    from wurk.redis.connection import RedisPool

BULK_BATCH_SIZE = 1000
BULK_SCHEDULED_BATCH_SIZE = 100


def _tag(tag: Any, job_class: str) -> str:
    """A tag as the payload carries it: its ``str()``."""
    try:
        return tag if type(tag) is str else str(tag)
    except ValueError as exc:  # an integer past Python's digit limit
        raise InvalidJobError(f"job {job_class}: tags[{wire.short_repr(tag)}] has no string form: {exc}") from None


class Client:
    """Pushes jobs; ``Client(config, pool=..., chain=...)`` picks where and how.

    ``pool`` shards a push onto another Redis: a pool, or the name of a
    configured shard (:mod:`wurk.config.shards`); ``chain`` replaces the
    configuration's client middleware for this client. Without ``config``,
    a client made inside a running job pushes with that job's configuration
    (:func:`wurk.current_config`), anywhere else with the process default.
    """

    def __init__(
        self,
        config: Config | None = None,
        *,
        pool: RedisPool | str | None = None,
        chain: Chain | None = None,
    ) -> None:
        if config is None:  # the running job's configuration, else the process default
            from wurk.config.defaults import current_config

            config = current_config()
        self.config = config
        self._pool = shards.resolve(config, pool)
        self._chain = chain
        self._writers: PushWriterRegistry | None = None

    @property
    def redis_pool(self) -> RedisPool:
        return self._pool or self.config.redis_pool

    @property
    def writers(self) -> PushWriterRegistry:
        """The configuration's push writers (kept here: ``raw_push`` reads them
        on every push)."""
        if self._writers is None:
            self._writers = writers_for(self.config)
        return self._writers

    @property
    def has_middleware(self) -> bool:
        """Whether a push runs any client middleware at all."""
        return len(self._chain or self.config.client_middleware) > 0

    def middleware(self, configure: Callable[[Chain], object] | None = None) -> Chain:
        """The client's chain; with ``configure``, a modified copy this client adopts."""
        chain = self._chain or self.config.client_middleware
        if configure is not None:
            chain = chain.copy_for(self.config)
            configure(chain)
            self._chain = chain
        return chain

    # -- normalisation --------------------------------------------------------

    def normalize_item(self, item: Mapping[str, Any]) -> Payload:
        """The item merged over its class's options, checked and stamped.

        Raises before anything is written when the item is malformed.
        """
        wire.validate(item)
        job_class = item["class"]
        options_of = getattr(job_class, "get_options", None)
        defaults = options_of(self.config) if callable(options_of) else dict(self.config.default_job_options)
        normed: dict[str, Any] = {**defaults, **item}
        name = wire.class_name(job_class)
        normed["class"] = name
        normed["args"] = list(normed["args"])
        normed["queue"] = wire.validate_queue(normed.get("queue"), name)
        normed.pop("pool", None)
        if normed.get("tags") is not None:
            normed["tags"] = [_tag(tag, name) for tag in normed["tags"]]
        else:
            normed.pop("tags", None)  # no tags, as when the key is missing
        options = self.config.job_options
        options.check(normed)
        options.coerce(normed)
        self._convert_durations(normed)
        normed.setdefault("jid", wire.new_jid())
        normed.setdefault("created_at", wire.now_ms())
        self._stamp_expiry(normed)
        normed["args"] = wire.verify_args(normed["args"], self.config["on_complex_arguments"], self.config.logger, name)
        return fields.checked_payload(normed)

    @staticmethod
    def _convert_durations(normed: dict[str, Any]) -> None:
        for key in ("retry_for", "expires_in"):
            if key in normed and normed[key] is not None:
                seconds = wire.to_seconds(normed[key], f"job {normed['class']}: {key}")
                normed[key] = int(seconds) if seconds.is_integer() else seconds

    @staticmethod
    def _stamp_expiry(normed: dict[str, Any]) -> None:
        """``expires_in`` becomes an absolute ``expiry``, measured from ``at``
        for a scheduled job and from ``created_at`` otherwise. An existing
        ``expiry`` (a retried or promoted job) is kept."""
        expires_in = normed.get("expires_in")
        if expires_in is None or "expiry" in normed:
            return
        if expires_in <= 0:
            raise InvalidJobError(f"job {normed['class']}: expires_in must be > 0, got {expires_in!r}")
        origin = normed.get("at") or normed["created_at"] / 1000.0
        normed["expiry"] = origin + expires_in

    def _routed(self, item: Mapping[str, Any]) -> RedisPool | None:
        """The pool the item, its class's options or this client route the
        push to (a shard's name is looked up); None for the configuration's
        main pool."""
        pool = item.get("pool")
        if pool is None:
            class_options = getattr(item.get("class"), "wurk_options", None)
            pool = class_options.get("pool") if isinstance(class_options, dict) else None
        if isinstance(pool, str):
            interceptor = interception.interceptor
            if interceptor is not None and interceptor.enabled():
                return self._pool  # a testing mode takes the job: no Redis, so no shard to look up
            return self.config.shard(pool)
        return pool or self._pool

    def _pool_for(self, item: Mapping[str, Any]) -> RedisPool:
        return self._routed(item) or self.config.redis_pool

    # -- pushing ----------------------------------------------------------------

    def push(self, item: Mapping[str, Any], *, origin: str = PUSH) -> str | None:
        """Push one job; its jid, or ``None`` when a middleware halted it.

        ``origin`` tells the push writers who pushes (:mod:`wurk.client.writers`).
        A push routed to another pool (a shard) runs its middleware and its
        writer inside ``wurk.via(pool)``, so that what they keep in Redis
        beside the job (a unique lock, a batch's books) lands on the job's shard.
        """
        routed = self._routed(item)
        normed = self.normalize_item(item)
        if routed is None:
            return self.push_normalized(normed, self.config.redis_pool, origin=origin)
        with shards.via(routed, self.config):
            return self.push_normalized(normed, routed, origin=origin)

    def cancel(self, jid: str) -> int:
        """Cancel the iterable job ``jid``, running or not yet started: it
        stops before its next iteration once it sees the mark (within one
        checkpoint interval, five seconds). Returns the cancellation's epoch
        seconds, the first one's if the job was already cancelled."""
        from wurk.iterable import state

        if not isinstance(jid, str) or not jid:
            raise ValueError(f"cancel needs a job's jid, got {jid!r}")
        return state.cancel(self.redis_pool, jid)

    def push_normalized(self, normed: Payload, pool: RedisPool, *, origin: str = PUSH) -> str | None:
        """Run an already normalised job through the chain and write it."""
        pushed = self._through_chain(normed, pool)
        if pushed is None:
            return None
        self.raw_push([pushed], pool, origin=origin)
        return str(pushed["jid"])

    def _through_chain(self, normed: Payload, pool: RedisPool) -> Payload | None:
        chain = self._chain or self.config.client_middleware
        if not len(chain):
            return normed
        result = chain.invoke(normed["class"], normed, normed["queue"], pool, final=lambda: normed)
        return normed if result else None

    def push_bulk(self, item: Mapping[str, Any]) -> list[str | None]:
        """Push one job per entry of ``item["args"]`` (a list of argument lists).

        ``at`` may be one time for all or a list with one per job. Jobs go to
        Redis in slices of ``batch_size`` (1,000; 100 when scheduled). Returns
        the jids in order, ``None`` where a middleware halted a job.
        """
        routed = self._routed(item)
        if routed is None:
            return self._push_bulk(item, self.config.redis_pool)
        with shards.via(routed, self.config):
            return self._push_bulk(item, routed)

    def _push_bulk(self, item: Mapping[str, Any], pool: RedisPool) -> list[str | None]:
        args_list = item.get("args")
        if not isinstance(args_list, list | tuple) or not all(isinstance(a, list | tuple) for a in args_list):
            raise InvalidJobError("push_bulk: args must be a list of argument lists, like [[1], [2]]")
        at = item.get("at")
        ats = self._bulk_times(at, len(args_list))
        default_size = BULK_SCHEDULED_BATCH_SIZE if at is not None else BULK_BATCH_SIZE
        batch_size = item.get("batch_size", default_size)
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise InvalidJobError(f"push_bulk: batch_size must be a whole number > 0, got {batch_size!r}")
        base = {key: value for key, value in item.items() if key not in ("args", "at", "batch_size")}
        if not args_list:
            return []
        first_at = ats[0] if ats else None
        template = self.normalize_item({**base, "args": [], **({"at": first_at} if first_at is not None else {})})
        mode, logger = self.config["on_complex_arguments"], self.config.logger
        args_list = [wire.verify_args(list(args), mode, logger, template["class"]) for args in args_list]
        chained = self.has_middleware
        jids: list[str | None] = []
        for start in range(0, len(args_list), batch_size):
            chunk = args_list[start : start + batch_size]
            fresh = wire.new_jids(len(chunk))
            pushed: list[Payload] = []
            for offset, args in enumerate(chunk):
                job: Payload = {**template, "args": args, "jid": fresh[offset]}
                if ats:
                    job["at"] = ats[start + offset]
                survivor = self._through_chain(job, pool) if chained else job
                jids.append(survivor["jid"] if survivor else None)
                if survivor:
                    pushed.append(survivor)
            if pushed:
                self.raw_push(pushed, pool)
        return jids

    @staticmethod
    def _bulk_times(at: Any, count: int) -> list[float] | None:
        if at is None:
            return None
        values = list(at) if isinstance(at, list | tuple) else [at] * count
        if len(values) != count:
            raise InvalidJobError(f"push_bulk: 'at' has {len(values)} times for {count} jobs")
        return [wire.epoch_seconds(value, "push_bulk: 'at'") for value in values]

    def raw_push(self, payloads: Sequence[Payload], pool: RedisPool | None = None, *, origin: str = PUSH) -> None:
        """Write payloads that already went through the chain.

        The one place every push funnels through: the testing modes and the
        outage buffer intercept here, and each payload goes to its writer.
        """
        writers = self._writers or self.writers
        # The interceptor is unset unless a testing mode may be on somewhere,
        # so with testing off a push pays one attribute read, not a call.
        interceptor = interception.interceptor
        if interceptor is not None and interceptor.enabled():
            if writers.plugged:
                for writer, group in writers.route(payloads, origin):
                    writer.intercepted(group, origin)
            interceptor.intercept(payloads, self)
            return
        pool = pool or self.redis_pool
        if not writers.plugged:
            self.deliver(writers.core, list(payloads), pool, origin)
            return
        # Writers whose payloads cannot be held back go first: when one of
        # them fails (Redis away), the push raises before anything else of it
        # was written or buffered.
        groups = sorted(writers.route(payloads, origin), key=lambda routed: routed[0].replayable)
        for writer, group in groups:
            self.deliver(writer, group, pool, origin)

    def deliver(self, writer: PushWriter, payloads: list[Payload], pool: RedisPool, origin: str) -> None:
        """Have ``writer`` write ``payloads``, through the outage buffer when
        one is on (it refuses to hold a writer's payloads that are not replayable)."""
        buffer = self.config.lookup("outage_buffer")
        durable = None
        if origin == PUSH and writer is not self.writers.core:  # core's writer waits within its own round trip
            durable = self.config["durable_push"] or None  # False in YAML is off too
        if buffer is None:
            if durable is None:
                writer.write(payloads, pool, origin)
            else:
                _durably(writer, payloads, pool, origin, durable)
            return
        buffer.push(
            (lambda batch: writer.write(batch, pool, origin))
            if durable is None
            else (lambda batch: _durably(writer, batch, pool, origin, durable)),
            payloads,
            writer_name=writer.name,
            replayable=writer.replayable,
        )


def _durably(writer: PushWriter, batch: list[Payload], pool: RedisPool, origin: str, durable: Any) -> None:
    """A plugin writer's write, then the durable push's wait for the replicas."""
    writer.write(batch, pool, origin)
    await_replicas_after(pool, batch, durable)
