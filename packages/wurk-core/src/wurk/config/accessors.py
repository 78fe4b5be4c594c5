"""The named accessors of a configuration that are shortcuts onto its keys.

The guides give a configuration named calls beside its hash (``config.
fetch_poll_interval = 5``, ``config.health_check(port=7433)``,
``config.reliable_scheduler()``), and existing code relies on each. None adds
state: each reads or writes a key, so that the hash stays the one source of
truth, or reaches a service. They live here, mixed into
:class:`wurk.config.configuration.Config`, so that the configuration module keeps to the
hash, the capsules and the wiring.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from wurk.config import shards as sharding
from wurk.config.settings import check_event
from wurk.current import routed_pool
from wurk.errors import ConfigurationError

if TYPE_CHECKING:
    from wurk.config.capsule import Capsule
    from wurk.config.configuration import Config, DeathHandler, ErrorHandler
    from wurk.metrics.statsd_client import StatsdClient
    from wurk.plugins.events import Events
    from wurk.plugins.manager import Plugins
    from wurk.redis.connection import RedisPool
    from wurk.redis.pools import ConfigPools

#: Seconds between attempts to take over a shared health port that another
#: process holds (``wurk.server.health`` uses it too).
SHARE_RETRY = 5.0


class NamedAccessors:
    """Mixed into :class:`wurk.config.configuration.Config`, whose parts below it uses."""

    if TYPE_CHECKING:
        _options: dict[str, Any]
        _statsd: StatsdClient
        _pools: ConfigPools
        _events: Events
        _plugins: Plugins | None
        _capsules: dict[str, Capsule]

        @property
        def default_capsule(self) -> Capsule: ...

        @property
        def plugins(self) -> Plugins: ...
        def _check_frozen(self) -> None: ...
        def __getitem__(self, key: str) -> Any: ...
        def __setitem__(self, key: str, value: Any) -> None: ...
        def lookup(self, name: str, default_factory: Callable[[Config], Any] | None = None) -> Any: ...
        def register(self, name: str, service: Any) -> None: ...

    # -- handlers -------------------------------------------------------------

    @property
    def error_handlers(self) -> list[ErrorHandler]:
        handlers: list[ErrorHandler] = self._options["error_handlers"]
        return handlers

    @error_handlers.setter
    def error_handlers(self, handlers: list[ErrorHandler]) -> None:
        """Replace the handlers, the default logging one included."""
        self["error_handlers"] = handlers

    @property
    def death_handlers(self) -> list[DeathHandler]:
        handlers: list[DeathHandler] = self._options["death_handlers"]
        return handlers

    @death_handlers.setter
    def death_handlers(self, handlers: list[DeathHandler]) -> None:
        self["death_handlers"] = handlers

    def on_redis_error(self, handler: Callable[[dict[str, Any]], object]) -> Callable[[dict[str, Any]], object]:
        """Register telemetry for pool retries and give-ups (usable as a decorator)."""
        self._options["redis_error_handlers"].append(handler)
        return handler

    def on_poison(self, callback: Callable[[dict[str, Any]], object]) -> Callable[[dict[str, Any]], object]:
        """Call ``callback({"jid", "klass", "count", "queue"})`` when the reaper
        kills a poison pill (usable as a decorator)."""
        self._options.setdefault("poison_callbacks", []).append(callback)
        return callback

    # -- pools (built and tracked by wurk.redis.pools) ------------------------------

    @property
    def redis_pool(self) -> RedisPool:
        """The default capsule's main pool; inside ``wurk.via(...)`` for this
        configuration, the pool the block routes to."""
        routed = routed_pool.get()
        if routed is not None and routed[0] is self:
            return routed[1]
        return self.default_capsule.redis_pool

    @property
    def shards(self) -> dict[str, dict[str, Any]]:
        """The configured shards (``shards``, else ``WURK_SHARDS``): each
        name with its connection options."""
        configured = self["shards"]
        return {name: dict(options) for name, options in (configured or {}).items()}

    def shard(self, name: str) -> RedisPool:
        """The pool of shard ``name``, built on first use (``size`` from its
        options, else ``max(10, total concurrency)``) and reset with the
        others; a name nobody configured is a one-line ConfigurationError."""
        options = self.shards.get(name) if isinstance(name, str) else None
        if options is None:
            raise sharding.unknown_shard(name, self.shards)
        size = int(options.get("size") or max(10, sum(c.concurrency for c in self._capsules.values())))
        return self._pools.shard(name, options, size)

    def new_redis_pool(self, size: int, name: str = "custom", **overrides: Any) -> RedisPool:
        """An extra pool on the configured server (``overrides`` change its
        connection options); ``reset_redis_pools`` drops it too."""
        return self._pools.new(size, name, **overrides)

    @property
    def _custom_pools(self) -> list[RedisPool]:
        return list(self._pools.custom)

    def shared_redis_pool(self, name: str, size: int, **overrides: Any) -> RedisPool:
        """The pool called ``name``, built on the first ask (``size`` and
        ``overrides`` as for :meth:`new_redis_pool`) and handed to every later
        one, until ``reset_redis_pools``. A feature that keeps one pool of its
        own (the dashboard's) asks for it here."""
        return self._pools.shared(name, size, **overrides)

    def reset_redis_pools(self) -> None:
        """Disconnect and forget every pool (call around ``fork``)."""
        self._pools.reset(self._capsules.values())

    # -- lifecycle (one dispatch with the plugins' hooks, in wurk.plugins.events) -------

    def on(self, event: str, handler: Callable[[], object] | None = None) -> Any:
        """Register a callable (taking no arguments) for a lifecycle event,
        directly or as a decorator; it runs in one order with the plugins'
        ``wurk_<event>`` hooks (see :mod:`wurk.plugins.events`)::

            config.on("quiet", flush_metrics)

            @config.on("startup")
            def hello(): ...
        """
        check_event(event)

        def register(handler: Callable[[], object]) -> Callable[[], object]:
            self._events.on(event, handler, self._plugins)
            return handler

        return register if handler is None else register(handler)

    def fire_event(self, event: str, *, reraise: bool = False) -> None:
        """Run ``event``'s plugin hooks and ``config.on`` callbacks, in one order.

        ``config.on`` callbacks run once (except on ``beat`` and
        ``before_fork``); ``quiet``, ``shutdown`` and ``exit`` run
        last-registered first. A failure is reported and the rest still run,
        unless ``reraise`` (``startup``, whose failure aborts the boot).
        """
        self._events.fire(event, self.plugins, reraise=reraise)

    # -- Pro/Enterprise toggles that carry over -----------------------------

    def super_fetch(self, recovery_callback: Callable[..., object] | None = None) -> None:
        """Sidekiq Pro's toggle: reliable fetch is always on, so this only keeps
        the optional recovery callback."""
        if recovery_callback is not None:
            self._options["super_fetch_callback"] = recovery_callback

    def reliable_scheduler(self) -> None:
        """Promote due jobs with one atomic script instead of pop-then-push."""
        self["scheduled_enq"] = "reliable"

    @property
    def fetch_poll_interval(self) -> float:
        return float(self._options.get("fetch_poll_interval", 2))

    @fetch_poll_interval.setter
    def fetch_poll_interval(self, seconds: float) -> None:
        self["fetch_poll_interval"] = seconds

    def health_check(
        self,
        port: int,
        bind: str = "0.0.0.0",
        ready_window: float = 30,
        *,
        share: bool = False,
        retry: float | None = None,
    ) -> None:
        """Opt in to the ``/live`` and ``/ready`` listener of each worker process.

        ``share=True`` is for several processes of one host on one port (a
        swarm's children): a process that finds the port taken waits and
        tries every ``retry`` seconds (default :data:`SHARE_RETRY`)
        instead of failing its boot, so a survivor takes over the probes.
        """
        if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
            raise ConfigurationError(f"health_check port must be 0..65535, got {port!r}")
        if not isinstance(bind, str) or not bind.strip():
            raise ConfigurationError(f"health_check bind address must not be empty, got {bind!r}")
        if isinstance(ready_window, bool) or not isinstance(ready_window, int | float) or not ready_window > 0:
            raise ConfigurationError(f"health_check ready_window must be > 0, got {ready_window!r}")
        if not isinstance(share, bool):
            raise ConfigurationError(f"health_check share must be True or False, got {share!r}")
        if retry is None:
            retry = SHARE_RETRY
        if isinstance(retry, bool) or not isinstance(retry, int | float) or not retry > 0:
            raise ConfigurationError(f"health_check retry must be > 0 seconds, got {retry!r}")
        self["health_check_options"] = {
            "port": port,
            "bind": bind,
            "ready_window": ready_window,
            "share": share,
            "retry": retry,
        }

    def reliable_push(
        self, *, buffer_size: int = 1000, overflow: str = "drop_oldest", drain_interval: float | None = None
    ) -> Any:
        """Buffer pushes in memory while Redis is unreachable, and replay them in
        order once it is back (see ``docs/reliability.md`` for what this does
        not protect against). ``drain_interval`` starts a background drainer."""
        from wurk.client.outage import OutageBuffer

        buffer = self.lookup("outage_buffer")
        if buffer is None:
            buffer = OutageBuffer(cast("Config", self), size=buffer_size, overflow=overflow)
            self.register("outage_buffer", buffer)
        else:
            buffer.configure(size=buffer_size, overflow=overflow)
        if drain_interval is not None:
            buffer.start_drainer(drain_interval)
        return buffer

    def periodic(self, block: Callable[[Any], object]) -> Callable[[Any], object]:
        """Register periodic jobs (wurk-cron): ``block(mgr)`` runs when a worker
        starts, onto one manager shared by every block (usable as a decorator)::

            @config.periodic
            def loops(mgr):
                mgr.register("*/5 * * * *", "app.jobs.ReportJob")

        Core only hands the block on to the service wurk-cron registers under
        ``"periodic"``; without the plugin the call fails here, not silently.
        """
        self._check_frozen()
        _ = self.plugins
        service = self.lookup("periodic")
        if service is None:
            raise ConfigurationError(
                "config.periodic needs the wurk-cron plugin: install wurk-cron, "
                "or enable it if WURK_DISABLE_PLUGINS switches it off"
            )
        service.add(block)
        return block

    # -- statsd (the client lives in wurk.metrics.statsd_client) ------------------------------

    @property
    def statsd(self) -> Any:
        """The statsd client built by ``config.dogstatsd`` or from the ``statsd``
        setting, once per process (``None`` while neither is set)."""
        return self._statsd.client

    def statsd_increment(self, metric: str, **tags: Any) -> None:
        self._statsd.increment(metric, **tags)

    @property
    def server(self) -> bool:
        return bool(self._options.get("server"))
