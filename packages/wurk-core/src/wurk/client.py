"""The client: everything that puts a job into Redis goes through here.

``push`` and ``push_bulk`` normalise and check the item, run the client
middleware chain per job (a falsy return halts that job's push), and hand the
survivors to ``raw_push``, the single point where the testing modes and the
outage buffer intercept. An immediate push is one pipeline (``SADD queues`` and
one ``LPUSH`` per queue); a scheduled one is one ``ZADD schedule``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from wurk import keys, testing
from wurk import payload as wire
from wurk.payload import InvalidJobError

if TYPE_CHECKING:
    from wurk.config import Config
    from wurk.middleware import Chain
    from wurk.redis_pool import RedisPool

BULK_BATCH_SIZE = 1000
BULK_SCHEDULED_BATCH_SIZE = 100

Payload = dict[str, Any]


class Client:
    """Pushes jobs; ``Client(config, pool=..., chain=...)`` picks where and how.

    ``pool`` shards a push onto another Redis; ``chain`` replaces the
    configuration's client middleware for this client.
    """

    def __init__(
        self,
        config: Config | None = None,
        *,
        pool: RedisPool | None = None,
        chain: Chain | None = None,
    ) -> None:
        if config is None:
            from wurk.defaults import default_config

            config = default_config()
        self.config = config
        self._pool = pool
        self._chain = chain

    @property
    def redis_pool(self) -> RedisPool:
        return self._pool or self.config.redis_pool

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
        normed: Payload = {**defaults, **item}
        name = wire.class_name(job_class)
        normed["class"] = name
        normed["args"] = list(normed["args"])
        normed["queue"] = wire.validate_queue(normed.get("queue"), name)
        normed.pop("pool", None)
        if "tags" in normed:
            normed["tags"] = [str(tag) for tag in normed["tags"]]
        self.config.job_options.check(normed)
        self._convert_durations(normed)
        normed.setdefault("jid", wire.new_jid())
        normed.setdefault("created_at", wire.now_ms())
        self._stamp_expiry(normed)
        normed["args"] = wire.verify_args(normed["args"], self.config["on_complex_arguments"], self.config.logger, name)
        return normed

    @staticmethod
    def _convert_durations(normed: Payload) -> None:
        for key in ("retry_for", "expires_in"):
            if key in normed and normed[key] is not None:
                seconds = wire.to_seconds(normed[key])
                normed[key] = int(seconds) if seconds.is_integer() else seconds

    @staticmethod
    def _stamp_expiry(normed: Payload) -> None:
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

    def _pool_for(self, item: Mapping[str, Any]) -> RedisPool:
        pool = item.get("pool")
        if pool is None:
            class_options = getattr(item.get("class"), "wurk_options", None)
            pool = class_options.get("pool") if isinstance(class_options, dict) else None
        return pool or self._pool or self.config.redis_pool

    # -- pushing ----------------------------------------------------------------

    def push(self, item: Mapping[str, Any]) -> str | None:
        """Push one job; its jid, or ``None`` when a middleware halted it."""
        pool = self._pool_for(item)
        return self.push_normalized(self.normalize_item(item), pool)

    def push_normalized(self, normed: Payload, pool: RedisPool) -> str | None:
        """Run an already normalised job through the chain and write it."""
        pushed = self._through_chain(normed, pool)
        if pushed is None:
            return None
        self.raw_push([pushed], pool)
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
        pool = self._pool_for(item)
        chained = len(self._chain or self.config.client_middleware) > 0
        jids: list[str | None] = []
        for start in range(0, len(args_list), batch_size):
            chunk = args_list[start : start + batch_size]
            fresh = wire.new_jids(len(chunk))
            pushed: list[Payload] = []
            for offset, args in enumerate(chunk):
                job = {**template, "args": args, "jid": fresh[offset]}
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
        for value in values:
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise InvalidJobError(f"push_bulk: 'at' must be epoch seconds, got {value!r}")
        return [float(value) for value in values]

    def raw_push(self, payloads: Sequence[Payload], pool: RedisPool | None = None) -> None:
        """Write payloads that already went through the chain.

        The one place every push funnels through: the testing modes and the
        outage buffer intercept here.
        """
        # ``state.active`` is false unless a testing mode may be on somewhere,
        # so with testing off a push pays one attribute read, not a call.
        if testing.state.active and testing.state.enabled():
            testing.intercept(payloads, self)
            return
        pool = pool or self.redis_pool
        buffer = self.config.lookup("outage_buffer")
        if buffer is not None:
            buffer.push(lambda batch: self.write(batch, pool), list(payloads))
        else:
            self.write(payloads, pool)

    def write(self, payloads: Sequence[Payload], pool: RedisPool) -> None:
        """One round trip to Redis for ``payloads``: ``ZADD schedule`` for the
        scheduled ones; ``SADD queues`` and one ``LPUSH`` per queue for the rest."""
        scheduled = [job for job in payloads if job.get("at") is not None]
        immediate = [job for job in payloads if job.get("at") is None]
        pool.execute(lambda conn: pool.send(self._commands(scheduled, immediate)))

    @staticmethod
    def _commands(scheduled: list[Payload], immediate: list[Payload]) -> list[tuple[Any, ...]]:
        commands: list[tuple[Any, ...]] = []
        if scheduled:
            pairs: list[Any] = []
            for job in scheduled:
                member = {key: value for key, value in job.items() if key not in ("at", "enqueued_at")}
                pairs += [float(job["at"]), wire.dumps(member)]
            commands.append(("ZADD", keys.SCHEDULE, *pairs))
        if immediate:
            now = wire.now_ms()
            by_queue: dict[str, list[str]] = {}
            for job in immediate:
                job["enqueued_at"] = now
                by_queue.setdefault(job["queue"], []).append(wire.dumps(job))
            commands.append(("SADD", keys.QUEUES, *by_queue))
            commands += [("LPUSH", keys.queue(queue), *encoded) for queue, encoded in by_queue.items()]
        return commands
