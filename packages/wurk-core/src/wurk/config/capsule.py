"""Capsules: a set of queues served by a set of threads.

Every configuration has a ``"default"`` capsule, which ``config.concurrency``
and ``config.queues`` read and write; more can be declared to give some queues
threads of their own. A capsule has its own fetcher, its own copies of the
middleware chains and its own Redis pools in each worker process.

The fetch order is derived from the weights, never declared: no weights (all
0) is ``strict`` (queues in the order given), all-equal weights is ``random``,
anything else is ``weighted``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from wurk.client.middleware import Chain
from wurk.errors import ConfigurationError

if TYPE_CHECKING:
    from wurk.config.configuration import Config
    from wurk.redis.connection import RedisPool
    from wurk.redis.scripts import ScriptRegistry
    from wurk.server.fetch import Fetcher

QueueEntry = str | Sequence[Any]

#: The prefix of a queue's Redis key, never part of the queue's name.
QUEUE_PREFIX = "queue:"


def parse_queue(entry: QueueEntry) -> tuple[str, int]:
    """``"name"``, ``"name,3"``, ``["name"]`` or ``["name", 3]`` → (name, weight).

    A missing weight is 0 (strict order); an explicit weight must be a whole
    number above 0. A name given as its Redis key (``queue:mail``) is refused.
    """
    if isinstance(entry, str):
        name, _, weight_text = entry.partition(",")
        weight: Any = weight_text if _ else None
    elif isinstance(entry, Sequence) and 1 <= len(entry) <= 2:
        name = entry[0]
        weight = entry[1] if len(entry) == 2 else None
    else:
        raise ConfigurationError(f"queue entry {entry!r} must be 'name', 'name,weight' or [name, weight]")
    if not isinstance(name, str) or not name.strip():
        raise ConfigurationError(f"queue entry {entry!r} has no queue name")
    name = name.strip()
    if name.startswith(QUEUE_PREFIX):
        # The Redis key of queue "mail" is "queue:mail"; serving "queue:mail"
        # would watch "queue:queue:mail", where nothing is ever pushed.
        bare = name[len(QUEUE_PREFIX) :]
        raise ConfigurationError(
            f"queue {name!r}: name the queue without the {QUEUE_PREFIX!r} prefix ({bare!r}); "
            f"Wurk adds it to form the Redis key"
        )
    if weight is None:
        return name, 0
    try:
        number = int(str(weight).strip())
    except ValueError:
        raise ConfigurationError(f"queue {name!r} has weight {weight!r}; a weight is a whole number > 0") from None
    if number <= 0:
        raise ConfigurationError(f"queue {name!r} has weight {number}; a weight must be > 0 (omit it for strict order)")
    return name, number


class Capsule:
    """One processing unit: threads, queues, fetcher, chains and pools."""

    def __init__(self, name: str, config: Config) -> None:
        self.name = name
        self.config = config
        self._concurrency: int | None = None
        self._weights: dict[str, int] = {"default": 0}
        self._client_chain: Chain | None = None
        self._server_chain: Chain | None = None
        self._pools: dict[str, RedisPool] = {}
        self._lock = threading.Lock()
        self.fetcher: Fetcher | None = None

    def __repr__(self) -> str:
        return f"<Capsule {self.name} concurrency={self.concurrency} queues={self.queue_specs}>"

    def _check_frozen(self) -> None:
        self.config._check_frozen()

    @property
    def concurrency(self) -> int:
        if self._concurrency is not None:
            return self._concurrency
        return int(self.config.option("concurrency") or 5)

    @concurrency.setter
    def concurrency(self, value: int) -> None:
        self._check_frozen()
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigurationError(f"capsule {self.name}: concurrency must be a whole number > 0, got {value!r}")
        self._concurrency = value

    @property
    def weights(self) -> dict[str, int]:
        return dict(self._weights)

    @property
    def queues(self) -> list[str]:
        """The queue list with each name repeated ``weight`` times (at least once)."""
        return [name for name, weight in self._weights.items() for _ in range(max(weight, 1))]

    @queues.setter
    def queues(self, entries: Iterable[QueueEntry]) -> None:
        self._check_frozen()
        if isinstance(entries, str):
            entries = [entries]
        weights: dict[str, int] = {}
        for entry in entries:
            name, weight = parse_queue(entry)
            weights[name] = weights.get(name, 0) + weight
        if not weights:
            raise ConfigurationError(f"capsule {self.name}: at least one queue is needed")
        self._weights = weights

    @property
    def queue_specs(self) -> list[str]:
        """``"name,weight"`` entries (``"name"`` when unweighted): lossless round trip."""
        return [f"{name},{weight}" if weight else name for name, weight in self._weights.items()]

    @property
    def description(self) -> str:
        """Threads and queues as the worker's start line shows them, for people:
        ``2 threads on queues critical (weight 3), default (weight 1)``,
        ``1 thread on queues a, b, in this order``."""
        threads = "1 thread" if self.concurrency == 1 else f"{self.concurrency} threads"
        names = list(self._weights)
        if len(names) == 1:
            return f"{threads} on queue {names[0]}"
        if self.mode == "weighted":
            # Weight 0 beside weighted queues counts once, as in ``queues``.
            listed = ", ".join(f"{name} (weight {max(weight, 1)})" for name, weight in self._weights.items())
        else:
            listed = f"{', '.join(names)}, {'in this order' if self.mode == 'strict' else 'in random order'}"
        return f"{threads} on queues {listed}"

    @property
    def mode(self) -> str:
        values = set(self._weights.values())
        if values == {0}:
            return "strict"
        if len(values) == 1:
            return "random"
        return "weighted"

    @property
    def client_middleware(self) -> Chain:
        if self._client_chain is None:
            self._client_chain = self.config.client_middleware.copy_for(self)
        return self._client_chain

    @property
    def server_middleware(self) -> Chain:
        if self._server_chain is None:
            self._server_chain = self.config.server_middleware.copy_for(self)
        return self._server_chain

    def prepare(self) -> None:
        """Take the middleware copies now (the launcher calls this at boot)."""
        _ = self.client_middleware, self.server_middleware

    @property
    def logger(self) -> logging.Logger:
        return self.config.logger

    def handle_exception(self, exc: BaseException, context: dict[str, Any] | None = None) -> None:
        self.config.handle_exception(exc, context)

    @property
    def scripts(self) -> ScriptRegistry:
        """The configuration's Lua scripts, for middleware built with a capsule."""
        return self.config.scripts

    @property
    def redis_pool(self) -> RedisPool:
        """The main pool: ``config.redis["size"]`` or ``max(concurrency + 5, 10)``."""
        pool = self._pools.get("main")  # every push asks: answer without building options
        if pool is not None:
            return pool
        size = self.config.redis.get("size") or max(self.concurrency + 5, 10)
        return self._pool("main", int(size))

    @property
    def fetch_redis_pool(self) -> RedisPool:
        """The fetch-only pool: one connection per processor thread, and one
        the claims keep (:class:`~wurk.redis.connection.KeptConnection`). Its
        read timeout is a second wider than the ``BLMOVE`` block, so a fetch
        that legitimately waits on an empty queue never trips it."""
        from wurk.redis.connection import DEFAULT_READ_TIMEOUT

        block = float(self.config.option("fetch_poll_interval", 2))
        read_timeout = max(float(self.config.redis.get("read_timeout") or DEFAULT_READ_TIMEOUT), block + 1)
        return self._pool("fetch", self.concurrency + 1, read_timeout=read_timeout)

    def _pool(self, role: str, size: int, **overrides: Any) -> RedisPool:
        with self._lock:
            pool = self._pools.get(role)
            if pool is None:
                pool = self._pools[role] = self.config.new_redis_pool(size, f"{self.name}-{role}", **overrides)
            return pool

    def reset_redis_pools(self) -> None:
        with self._lock:
            pools, self._pools = self._pools, {}
        for pool in pools.values():
            pool.disconnect()
