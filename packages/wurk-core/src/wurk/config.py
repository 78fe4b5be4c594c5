"""The configuration of one Wurk process (or of one embedded instance).

A :class:`Config` is hash-like (``config["timeout"]``), because third-party
middleware and plugins read options by key, and has named accessors for the
options that need logic (``concurrency`` writes the default capsule,
``redis = {...}`` merges). The launcher freezes it at boot: a write after that
raises, since worker threads would not see it consistently.

Plugins are loaded when the configuration first needs them (``config.plugins``),
never at import; they contribute defaults, job options, middleware and Lua
scripts through their hooks at that moment.
"""

from __future__ import annotations

import copy
import difflib
import logging
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from wurk import env, forking
from wurk.capsule import Capsule, QueueEntry
from wurk.errors import ConfigurationError, FrozenConfigError
from wurk.hookspecs import LIFECYCLE_EVENTS
from wurk.middleware import Chain
from wurk.options import OptionRegistry
from wurk.outage import OutageLog, is_outage
from wurk.redis_pool import DEFAULT_URL, RedisPool
from wurk.registry import JobRegistry, check_module_names
from wurk.scripts import ScriptRegistry

if TYPE_CHECKING:
    from wurk.plugins import Plugins

ErrorHandler = Callable[[BaseException, dict[str, Any], "Config"], object]
DeathHandler = Callable[[dict[str, Any], BaseException], object]

DEFAULTS: dict[str, Any] = {
    "labels": set(),
    "require": ".",
    "environment": None,
    "concurrency": 5,
    "timeout": 25,
    "poll_interval_average": None,
    "average_scheduled_poll_interval": 5,
    "on_complex_arguments": "raise",
    "max_iteration_runtime": None,
    "error_handlers": [],
    "death_handlers": [],
    "lifecycle_events": {event: [] for event in LIFECYCLE_EVENTS},
    "dead_max_jobs": 10_000,
    "dead_timeout_in_seconds": 15_552_000,
    "reloader": lambda run: run(),
    "backtrace_cleaner": lambda lines: lines,
    "logged_job_attributes": ["bid", "tags"],
    "redis_idle_timeout": None,
    "redis_error_handlers": [],
}

#: Every option core reads or the guides document, besides ``DEFAULTS``: a new
#: key close to one of these is most likely a misspelling of it.
RUNTIME_OPTIONS = frozenset(
    {
        "queues",
        "capsules",
        "redis",
        "config_file",
        "tag",
        "identity",
        "verbose",
        "server",
        "disabled_plugins",
        "max_retries",
        "fetch_class",
        "fetch_setup",
        "fetch_poll_interval",
        "scheduled_enq",
        "job_logger",
        "skip_default_job_logging",
        "scheduler_initial_wait",
        "heartbeat_interval",
        "cron_tick_interval",
        "metrics_rollup_interval",
        "metrics_flush_interval",
        "super_fetch_reaper_interval",
        "super_fetch_callback",
        "poison_callbacks",
        "leader_ttl",
        "leader_renew_interval",
        "leader_follower_interval",
        "history_stream_cap",
        "health_check_options",
        "web_pool_size",
        "memory_limit_mb",
        "job_packages",
    }
)
KNOWN_OPTIONS = frozenset(DEFAULTS) | RUNTIME_OPTIONS

#: How alike (0..1, difflib's ratio) a new key must be to a known option to
#: count as a misspelling of it: "concurency" and "timeouts" are, Sidekiq-era
#: YAML keys such as "pidfile" or "schedule" are not.
TYPO_CUTOFF = 0.8

#: Job options every job starts from, unless ``default_job_options`` changes them.
DEFAULT_JOB_OPTIONS: dict[str, Any] = {"retry": True, "queue": "default"}

COMPLEX_ARGUMENT_MODES = ("raise", "warn", False)
#: Events that fire again and keep their callbacks: every beat, and every fork
#: of a parent that forks once per child. (``fork`` stays one-shot: each child
#: clears its own copy, so siblings still fire theirs.)
ONESHOT_EXEMPT = frozenset({"beat", "before_fork"})
REVERSED_EVENTS = frozenset({"quiet", "shutdown", "exit"})

_REDIS_ERROR_TYPES: tuple[type[BaseException], ...] = ()

#: The context the processor reports a failed job under.
JOB_FAILED = "Job raised exception"


def _redis_error_types() -> tuple[type[BaseException], ...]:
    global _REDIS_ERROR_TYPES
    if not _REDIS_ERROR_TYPES:
        import redis.exceptions

        from wurk.errors import RedisConnectionError

        _REDIS_ERROR_TYPES = (redis.exceptions.RedisError, RedisConnectionError)
    return _REDIS_ERROR_TYPES


def _summary(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def default_error_handler(exc: BaseException, context: dict[str, Any], config: Config) -> None:
    """Log what went wrong, in proportion.

    A failed job is a WARNING naming the job, with the traceback in
    development, where the person reading the log is the one who wrote the
    job. Redis being unreachable goes to the outage log, which says so once
    rather than once a second from every thread. Anything else is one line
    (Redis errors as warnings, the rest informational), with the traceback
    when ``WURK_DEBUG`` is set or the logger is at DEBUG.
    """
    logger = config.logger
    verbose = env.debug() or logger.isEnabledFor(logging.DEBUG)
    job = context.get("job")
    if context.get("context") == JOB_FAILED and isinstance(job, Mapping):
        development = (config.option("environment") or env.environment()) == "development"
        name = job.get("wrapped") or job.get("class")
        traceback = exc if development or verbose else None
        logger.warning("%s jid=%s failed: %s", name, job.get("jid"), _summary(exc), exc_info=traceback)
        return
    if is_outage(exc):
        config.outage_log.error(exc, str(context.get("context") or type(exc).__name__))
        return
    level = logging.WARNING if isinstance(exc, _redis_error_types()) else logging.INFO
    ctx = " ".join(f"{key}={value}" for key, value in context.items() if key != "job")
    logger.log(level, "%s%s", _summary(exc), f" ({ctx})" if ctx else "", exc_info=exc if verbose else None)


def _check_handlers(key: str, handlers: Any) -> list[Any]:
    if isinstance(handlers, str | bytes) or not isinstance(handlers, Iterable):
        raise ConfigurationError(f"{key} must be a list of callables, got {handlers!r}")
    handlers = list(handlers)
    for handler in handlers:
        if not callable(handler):
            raise ConfigurationError(f"{key} must hold callables, got {handler!r}")
    return handlers


def _positive_number(key: str, value: Any) -> Any:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise ConfigurationError(f"{key} must be a number > 0, got {value!r}")
    return value


def _whole_number(key: str, value: Any, *, minimum: int) -> Any:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigurationError(f"{key} must be a whole number >= {minimum}, got {value!r}")
    return value


def _complex_arguments_mode(key: str, value: Any) -> Any:
    if value not in COMPLEX_ARGUMENT_MODES:
        raise ConfigurationError(f"{key} must be 'raise', 'warn' or False, got {value!r}")
    return value


# Checks run on every write of these keys, through ``config[key] = ...`` as well
# as through the named accessors, so that YAML and plugins cannot slip past them.
_VALIDATORS: dict[str, Callable[[str, Any], Any]] = {
    "on_complex_arguments": _complex_arguments_mode,
    "error_handlers": _check_handlers,
    "death_handlers": _check_handlers,
    "redis_error_handlers": _check_handlers,
    "fetch_poll_interval": _positive_number,
    "web_pool_size": lambda key, value: _whole_number(key, value, minimum=1),
    "memory_limit_mb": lambda key, value: None if value is None else _whole_number(key, value, minimum=0),
    "job_packages": lambda key, value: None if value is None else check_module_names(key, value),
}


class _LiveHandlers:
    """The current ``redis_error_handlers`` list, read at each report, so that
    pools built earlier also call handlers registered (or assigned) later."""

    def __init__(self, options: dict[str, Any]) -> None:
        self._options = options

    def __iter__(self) -> Iterator[Any]:
        return iter(list(self._options.get("redis_error_handlers") or ()))


def _check_event(event: str) -> None:
    if event not in LIFECYCLE_EVENTS:
        raise ConfigurationError(f"unknown lifecycle event {event!r}; expected one of {', '.join(LIFECYCLE_EVENTS)}")


class Config:
    """Options, capsules, chains, handlers and pools of one Wurk process."""

    def __init__(self, options: Mapping[str, Any] | None = None, *, disabled_plugins: Iterable[str] = ()) -> None:
        self._options: dict[str, Any] = copy.deepcopy({k: v for k, v in DEFAULTS.items() if not callable(v)})
        self._options.update({k: v for k, v in DEFAULTS.items() if callable(v)})
        self._options["error_handlers"].append(default_error_handler)
        self._options["disabled_plugins"] = list(disabled_plugins)
        self._frozen = False
        self._redis: dict[str, Any] = {"url": None}
        self._capsules: dict[str, Capsule] = {}
        self._client_chain = Chain(self)
        self._server_chain = Chain(self)
        self._services: dict[str, Any] = {}
        self._custom_pools: list[RedisPool] = []
        self._web_pool: RedisPool | None = None
        self._plugins: Plugins | None = None
        self._scripts: ScriptRegistry | None = None
        self._job_options_registry: OptionRegistry | None = None
        self._logger: logging.Logger | None = None
        self._lock = threading.RLock()
        self._declaring = False
        self._declared: set[str] = set()
        self._unchecked: set[str] = set()
        self.default_job_options: dict[str, Any] = dict(DEFAULT_JOB_OPTIONS)
        self.thread_priority = -1
        self.jobs = JobRegistry(lambda: self._options.get("job_packages") or ())
        self.dogstatsd: Callable[[], Any] | None = None
        self._statsd: Any = None
        #: Says once, not once a second per thread, that Redis is unreachable.
        self.outage_log = OutageLog(self)
        self.default_capsule  # noqa: B018 - created eagerly so config.queues always works
        if options:
            self.update(options)
        forking.track(self)

    # -- hash-like access --------------------------------------------------

    def _check_frozen(self) -> None:
        if self._frozen:
            raise FrozenConfigError("the configuration is frozen: change it before the worker starts")

    def __getitem__(self, key: str) -> Any:
        if key == "concurrency":
            return self.concurrency
        if key == "queues":
            return self.queues
        return self._options[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self._check_frozen()
        if key == "concurrency":
            self.concurrency = value
        elif key == "queues":
            self.queues = value
        else:
            validate = _VALIDATORS.get(key)
            if key not in self._options and key not in KNOWN_OPTIONS:
                self._note_unknown(key)
            self._options[key] = value if validate is None else validate(key, value)

    # An unknown key is warned about, never refused: the configuration is an
    # open hash that third-party middleware reads its own keys from, and a
    # plugin's keys are only known once it has loaded, which is usually after
    # the application wrote them. A key close to a known option is almost
    # always a typo of it, though, and a typo silently does nothing.

    def _note_unknown(self, key: str) -> None:
        if self._declaring:  # a plugin's wurk_configure contributing its own key
            self._declared.add(key)
        elif not self._suggest(key):
            self._unchecked.add(key)  # looked at again once the plugins are loaded

    def _suggest(self, key: str) -> bool:
        """Warn if ``key`` looks like a misspelt known option; whether it did."""
        if not isinstance(key, str):
            return False
        close = difflib.get_close_matches(key, KNOWN_OPTIONS | self._declared, n=1, cutoff=TYPO_CUTOFF)
        if not close:
            return False
        self.logger.warning("unknown option %r; did you mean %r?", key, close[0])
        return True

    def __contains__(self, key: object) -> bool:
        return key in self._options or key in ("concurrency", "queues")

    def __iter__(self) -> Iterator[str]:
        return iter(self._options)

    def option(self, key: str, default: Any = None) -> Any:
        """The raw stored option, bypassing the named accessors."""
        return self._options.get(key, default)

    def get(self, key: str, default: Any = None) -> Any:
        """``config[key]``, or ``default`` when the option is unset."""
        # Spelled out on purpose: the ``self.get(key, default)`` form a linter
        # suggests (SIM401) would call this very method again, forever.
        try:
            return self[key]
        except KeyError:
            return default

    def fetch(self, key: str, *default: Any) -> Any:
        """``config[key]``, or ``default`` if given, else ``KeyError`` naming the key."""
        if key in self:
            return self[key]
        if default:
            return default[0]
        raise KeyError(f"no configuration option {key!r}")

    def setdefault(self, key: str, value: Any) -> Any:
        if self._declaring:
            self._declared.add(key)
        if key not in self:
            self[key] = value
        return self[key]

    def update(self, options: Mapping[str, Any]) -> None:
        """Merge ``options`` in (the guides' ``merge!``)."""
        for key, value in options.items():
            self[key] = value

    def dig(self, *keys: Any) -> Any:
        value: Any = self
        for key in keys:
            try:
                value = value[key]
            except (KeyError, IndexError, TypeError):
                return None
        return value

    # -- freezing -------------------------------------------------------------

    def freeze(self) -> None:
        """Refuse every later write (the launcher calls this at boot).

        The plugins are loaded first, so that the defaults they contribute
        through ``setdefault`` land before the configuration locks.
        """
        _ = self.plugins
        for key in sorted(self._unchecked - self._declared):
            self._suggest(key)
        self._unchecked.clear()
        self._frozen = True

    @property
    def frozen(self) -> bool:
        return self._frozen

    # -- capsules, concurrency, queues ------------------------------------

    @property
    def default_capsule(self) -> Capsule:
        return self.capsule("default")

    def capsule(
        self, name: str, *, concurrency: int | None = None, queues: Iterable[QueueEntry] | None = None
    ) -> Capsule:
        """The capsule ``name``, created on first use.

        ``concurrency`` and ``queues`` are applied to it; a new capsule whose
        settings are invalid is not kept.
        """
        with self._lock:
            found = self._capsules.get(name)
            if found is None:
                self._check_frozen()
                if not isinstance(name, str) or not name.strip():
                    raise ConfigurationError(f"a capsule needs a non-empty name, got {name!r}")
                created = Capsule(name, self)
                self._apply_capsule(created, concurrency, queues)
                self._capsules[name] = created
                return created
        self._apply_capsule(found, concurrency, queues)
        return found

    @staticmethod
    def _apply_capsule(capsule: Capsule, concurrency: int | None, queues: Iterable[QueueEntry] | None) -> None:
        if concurrency is not None:
            capsule.concurrency = concurrency
        if queues is not None:
            capsule.queues = queues

    @property
    def capsules(self) -> dict[str, Capsule]:
        return dict(self._capsules)

    @property
    def concurrency(self) -> int:
        return self.default_capsule.concurrency

    @concurrency.setter
    def concurrency(self, value: int) -> None:
        self.default_capsule.concurrency = value
        self._options["concurrency"] = value

    @property
    def queues(self) -> list[str]:
        return self.default_capsule.queues

    @queues.setter
    def queues(self, entries: Iterable[QueueEntry]) -> None:
        self.default_capsule.queues = entries

    @property
    def total_concurrency(self) -> int:
        return sum(capsule.concurrency for capsule in self._capsules.values())

    # -- middleware -------------------------------------------------------

    # Reading a chain loads the plugins first, so that their middleware (core's
    # built-ins included) is always registered before user code adds its own,
    # and before a capsule takes its copy: the order never depends on when the
    # plugins happened to load.

    @property
    def client_middleware(self) -> Chain:
        if self._plugins is None:
            _ = self.plugins
        return self._client_chain

    @property
    def server_middleware(self) -> Chain:
        if self._plugins is None:
            _ = self.plugins
        return self._server_chain

    # -- Redis ----------------------------------------------------------------

    @property
    def redis(self) -> dict[str, Any]:
        """The connection options (a copy); ``url`` falls back to ``REDIS_URL``."""
        import os

        options = dict(self._redis)
        options["url"] = options.get("url") or os.environ.get("REDIS_URL") or DEFAULT_URL
        return options

    @redis.setter
    def redis(self, options: Mapping[str, Any]) -> None:
        self._check_frozen()
        self._redis.update(options)
        self.reset_redis_pools()

    @property
    def redis_pool(self) -> RedisPool:
        """The default capsule's main pool."""
        return self.default_capsule.redis_pool

    def new_redis_pool(self, size: int, name: str = "custom", **overrides: Any) -> RedisPool:
        """An extra pool on the configured server (``overrides`` change its
        connection options); ``reset_redis_pools`` drops it too."""
        options = {**self.redis, **overrides}
        pool = RedisPool(options, size=size, name=name, error_handlers=_LiveHandlers(self._options))
        with self._lock:
            self._custom_pools.append(pool)
        return pool

    @property
    def web_pool_size(self) -> int:
        return int(self._options.get("web_pool_size", 5))

    @web_pool_size.setter
    def web_pool_size(self, value: int) -> None:
        self["web_pool_size"] = value

    @property
    def web_redis_pool(self) -> RedisPool:
        with self._lock:
            if self._web_pool is None:
                options = {**self.redis, "pool_timeout": 1.0}
                self._web_pool = RedisPool(
                    options, size=self.web_pool_size, name="web", error_handlers=_LiveHandlers(self._options)
                )
            return self._web_pool

    def reset_redis_pools(self) -> None:
        """Disconnect and forget every pool (call around ``fork``)."""
        with self._lock:
            pools, self._custom_pools = self._custom_pools, []
            self._web_pool = None
        for capsule in self._capsules.values():
            capsule.reset_redis_pools()
        for pool in pools:
            pool.disconnect()

    def reset_after_fork(self) -> None:
        """In a forked child: let go of what belongs to the parent process.

        :mod:`wurk.forking` calls this before the ``fork`` event. The pools
        (each capsule's main, fetch and waiter pools and every custom one all
        come from :meth:`new_redis_pool`; the web pool besides) keep their
        identity, so code holding one keeps working, but reconnect afresh. The
        statsd client is rebuilt from ``dogstatsd`` on next use, the outage log
        starts with no outage, and the parent worker's counters are no
        longer registered: the child's own launcher registers its own.
        """
        self._lock = threading.RLock()  # a parent thread may have held it
        pools = [*self._custom_pools, *([self._web_pool] if self._web_pool is not None else [])]
        for pool in pools:
            pool.reset_after_fork()
        if self._scripts is not None:
            self._scripts.reset_after_fork()
        client, self._statsd = self._statsd, None
        if client is not None:
            from wurk.metrics.statsd import discard_after_fork

            discard_after_fork(client)
        self.outage_log = OutageLog(self)
        self._services.pop("process_stats", None)

    def on_redis_error(self, handler: Callable[[dict[str, Any]], object]) -> Callable[[dict[str, Any]], object]:
        """Register telemetry for pool retries and give-ups (usable as a decorator)."""
        self._options["redis_error_handlers"].append(handler)
        return handler

    def on_poison(self, callback: Callable[[dict[str, Any]], object]) -> Callable[[dict[str, Any]], object]:
        """Call ``callback({"jid", "klass", "count", "queue"})`` when the reaper
        kills a poison pill (usable as a decorator)."""
        self._options.setdefault("poison_callbacks", []).append(callback)
        return callback

    # -- errors and deaths ----------------------------------------------------

    @property
    def error_handlers(self) -> list[ErrorHandler]:
        return self._options["error_handlers"]

    @error_handlers.setter
    def error_handlers(self, handlers: list[ErrorHandler]) -> None:
        """Replace the handlers, the default logging one included."""
        self["error_handlers"] = handlers

    @property
    def death_handlers(self) -> list[DeathHandler]:
        return self._options["death_handlers"]

    @death_handlers.setter
    def death_handlers(self, handlers: list[DeathHandler]) -> None:
        self["death_handlers"] = handlers

    def handle_exception(self, exc: BaseException, context: dict[str, Any] | None = None) -> None:
        """Run every error handler; one that raises is logged and skipped."""
        ctx = dict(context or {})
        for handler in list(self.error_handlers):
            try:
                handler(exc, ctx, self)
            except Exception as handler_exc:
                self.logger.error("error_handler raised: %r", handler_exc)

    # -- lifecycle ------------------------------------------------------------

    def on(self, event: str, handler: Callable[[], object] | None = None) -> Any:
        """Register a callable (taking no arguments) for a lifecycle event,
        directly or as a decorator::

            config.on("quiet", flush_metrics)

            @config.on("startup")
            def hello(): ...
        """
        _check_event(event)

        def register(handler: Callable[[], object]) -> Callable[[], object]:
            if not callable(handler):
                raise ConfigurationError(f"config.on({event!r}) needs a callable, got {handler!r}")
            self._options["lifecycle_events"][event].append(handler)
            return handler

        return register if handler is None else register(handler)

    def fire_event(self, event: str, *, reraise: bool = False) -> None:
        """Run ``event``'s callbacks and plugin hooks.

        Every event except ``beat`` fires once: its callbacks are dropped after
        the dispatch. ``quiet``, ``shutdown`` and ``exit`` run last-registered
        first. A failing callback is reported and the rest still run, unless
        ``reraise`` (``startup``, whose failure aborts the boot).
        """
        _check_event(event)
        handlers = list(self._options["lifecycle_events"][event])
        if event in REVERSED_EVENTS:
            handlers.reverse()
        if event not in ONESHOT_EXEMPT:
            self._options["lifecycle_events"][event] = []
        for handler in handlers:
            try:
                handler()
            except Exception as exc:
                if reraise:
                    raise
                self.handle_exception(exc, {"context": f"exception in {event} event"})
        self.plugins.fire(event, self, reraise=reraise)

    # -- services, logger --------------------------------------------------

    def register(self, name: str, service: Any) -> None:
        """Store an extension service under ``name`` (a service locator)."""
        self._services[name] = service

    def lookup(self, name: str, default_factory: Callable[[Config], Any] | None = None) -> Any:
        found = self._services.get(name)
        if found is None and default_factory is not None:
            found = self._services[name] = default_factory(self)
        return found

    @property
    def logger(self) -> logging.Logger:
        if self._logger is None:
            from wurk.logger import build_logger

            self._logger = build_logger()
        return self._logger

    @logger.setter
    def logger(self, logger: logging.Logger) -> None:
        self._logger = logger

    # -- plugins, scripts, job options ---------------------------------------

    @property
    def plugins(self) -> Plugins:
        """The plugin manager, loaded (and the plugins' hooks run) on first use."""
        with self._lock:
            if self._plugins is None:
                from wurk.plugins import Plugins

                self._plugins = Plugins(self._options["disabled_plugins"])
                self._configure_plugins(self._plugins)
                self._plugins.call.register_middleware(self._client_chain, self._server_chain, self)
            return self._plugins

    def use_plugins(self, plugins: Plugins) -> None:
        """Adopt an already-built plugin manager (tests, embedding hosts)."""
        with self._lock:
            self._plugins = plugins
            self._scripts = None
            self._job_options_registry = None
        self._configure_plugins(plugins)
        plugins.call.register_middleware(self._client_chain, self._server_chain, self)

    def _configure_plugins(self, plugins: Plugins) -> None:
        """Run ``wurk_configure``; the keys plugins write there are theirs, so
        they count as known options from then on."""
        self._declaring = True
        try:
            plugins.call.configure(self)
        finally:
            self._declaring = False

    @property
    def scripts(self) -> ScriptRegistry:
        with self._lock:
            if self._scripts is None:
                registry = ScriptRegistry()
                self.plugins.call.register_scripts(registry)
                self._scripts = registry
            return self._scripts

    @property
    def job_options(self) -> OptionRegistry:
        with self._lock:
            if self._job_options_registry is None:
                registry = OptionRegistry()
                self.plugins.call.register_options(registry)
                self._job_options_registry = registry
            return self._job_options_registry

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

    @property
    def memory_limit_mb(self) -> int | None:
        """RSS (MB) above which a swarm child is recycled; ``None`` when off.

        An assigned value (``None`` and ``0`` switch it off) wins over
        ``WURK_MAXMEM_MB`` / ``SIDEKIQ_MAXMEM_MB``.
        """
        if "memory_limit_mb" in self._options:
            return self._options["memory_limit_mb"] or None
        return env.memory_limit_mb()

    @memory_limit_mb.setter
    def memory_limit_mb(self, value: int | None) -> None:
        self["memory_limit_mb"] = value

    def health_check(self, port: int, bind: str = "0.0.0.0", ready_window: float = 30) -> None:
        """Opt in to the ``/live`` and ``/ready`` listener of each worker process."""
        if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
            raise ConfigurationError(f"health_check port must be 0..65535, got {port!r}")
        if not isinstance(bind, str) or not bind.strip():
            raise ConfigurationError(f"health_check bind address must not be empty, got {bind!r}")
        if isinstance(ready_window, bool) or not isinstance(ready_window, int | float) or not ready_window > 0:
            raise ConfigurationError(f"health_check ready_window must be > 0, got {ready_window!r}")
        self["health_check_options"] = {"port": port, "bind": bind, "ready_window": ready_window}

    # -- client-side outage buffer ------------------------------------------

    def reliable_push(
        self, *, buffer_size: int = 1000, overflow: str = "drop_oldest", drain_interval: float | None = None
    ) -> Any:
        """Buffer pushes in memory while Redis is unreachable, and replay them in
        order once it is back (see ``docs/reliability.md`` for what this does
        not protect against). ``drain_interval`` starts a background drainer."""
        from wurk.outage import OutageBuffer

        buffer = self.lookup("outage_buffer")
        if buffer is None:
            buffer = OutageBuffer(self, size=buffer_size, overflow=overflow)
            self.register("outage_buffer", buffer)
        else:
            buffer.configure(size=buffer_size, overflow=overflow)
        if drain_interval is not None:
            buffer.start_drainer(drain_interval)
        return buffer

    # -- statsd ------------------------------------------------------------------

    @property
    def statsd(self) -> Any:
        """The statsd client built by ``config.dogstatsd`` (``None`` when unset)."""
        if self._statsd is None and self.dogstatsd is not None:
            self._statsd = self.dogstatsd()
        return self._statsd

    def statsd_increment(self, metric: str, **tags: Any) -> None:
        client = self.statsd
        if client is None:
            return
        try:
            client.incr(metric) if hasattr(client, "incr") else client.increment(metric, tags=tags or None)
        except Exception as exc:
            self.handle_exception(exc, {"context": f"statsd {metric}"})

    @property
    def server(self) -> bool:
        return bool(self._options.get("server"))
