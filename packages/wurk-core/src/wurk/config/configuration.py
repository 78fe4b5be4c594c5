"""The configuration of one Wurk process (or of one embedded instance).

A :class:`Config` is hash-like (``config["timeout"]``), because third-party
middleware and plugins read options by key, and has named accessors for the
options that need logic (``concurrency`` writes the default capsule,
``redis = {...}`` merges). The launcher freezes it at boot: a write after that
raises, since worker threads would not see it consistently.

Which keys mean something, their defaults and their checks are declared in a
:class:`~wurk.config.settings.SettingRegistry`, by core and by each plugin. Plugins
are loaded when the configuration first needs them (``config.plugins``),
never at import; their settings, job options, middleware and Lua scripts come
in through their hooks at that moment. What is not configuration lives apart
and is reached from here: the pools (:mod:`wurk.redis.pools`), the services
(:mod:`wurk.plugins.services`), the statsd client (:mod:`wurk.metrics.statsd_client`) and the
lifecycle events (:mod:`wurk.plugins.events`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from wurk.client.middleware import Chain
from wurk.client.outage import OutageLog
from wurk.client.registry import JobRegistry
from wurk.config import defaults, forking
from wurk.config.accessors import NamedAccessors
from wurk.config.capsule import Capsule, QueueEntry
from wurk.config.catalog import TYPO_CUTOFF, KnownKeys
from wurk.config.options import OptionRegistry
from wurk.config.reporting import JOB_FAILED, default_error_handler
from wurk.config.settings import DEFAULTS, SettingRegistry
from wurk.errors import ConfigurationError, FrozenConfigError
from wurk.metrics.statsd_client import StatsdClient
from wurk.plugins.events import Events
from wurk.plugins.services import Services
from wurk.redis.connection import DEFAULT_URL
from wurk.redis.pools import ConfigPools
from wurk.redis.scripts import ScriptRegistry

if TYPE_CHECKING:
    from wurk.plugins.manager import Plugins

__all__ = ["DEFAULTS", "DEFAULT_JOB_OPTIONS", "JOB_FAILED", "TYPO_CUTOFF", "Config", "default_error_handler"]

ErrorHandler = Callable[[BaseException, dict[str, Any], "Config"], object]
DeathHandler = Callable[[dict[str, Any], BaseException], object]

#: Job options every job starts from, unless ``default_job_options`` changes them.
DEFAULT_JOB_OPTIONS: dict[str, Any] = {"retry": True, "queue": "default"}


class Config(NamedAccessors):
    """Options, capsules, chains, handlers and pools of one Wurk process."""

    def __init__(self, options: Mapping[str, Any] | None = None, *, disabled_plugins: Iterable[str] = ()) -> None:
        self._keys = KnownKeys(lambda: self.logger)
        self._options: dict[str, Any] = {s.name: s.default_value() for s in self._keys.settings if s.has_default}
        self._options["error_handlers"].append(default_error_handler)
        self._options["disabled_plugins"] = list(disabled_plugins)
        self._frozen = False
        self._redis: dict[str, Any] = {"url": None}
        self._capsules: dict[str, Capsule] = {}
        self._client_chain = Chain(self)
        self._server_chain = Chain(self)
        self._services = Services(self)
        self._pools = ConfigPools(self)
        self._events = Events(self)
        self._plugins: Plugins | None = None
        self._scripts: ScriptRegistry | None = None
        self._job_options_registry: OptionRegistry | None = None
        self._logger: logging.Logger | None = None
        self._lock = threading.RLock()
        self.default_job_options: dict[str, Any] = dict(DEFAULT_JOB_OPTIONS)
        self.thread_priority = -1
        self.jobs = JobRegistry(lambda: self._options.get("job_packages") or ())
        self.dogstatsd: Callable[[], Any] | None = None
        self._statsd = StatsdClient(self)
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
        if key not in self._options:
            if self._plugins is None and not self._keys.is_known(key):
                _ = self.plugins  # a plugin may declare it, with a default
            setting = self._keys.settings.get(key)
            if key not in self._options and setting is not None and setting.fallback is not None:
                return setting.fallback()
        return self._options[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self._check_frozen()
        if key == "concurrency":
            self.concurrency = value
        elif key == "queues":
            self.queues = value
        else:
            if key in ("disabled_plugins", "plugins") and self._plugins is not None:
                self.logger.warning(
                    "%s set after the plugins were loaded (by an earlier read, push or "
                    "plugins call): it has no effect in this process; set it first, or pass "
                    "Config(disabled_plugins=...) or WURK_DISABLE_PLUGINS",
                    key,
                )
            setting = self._keys.settings.get(key)
            if setting is None and key not in self._options:
                self._keys.note_unknown(key)
            self._options[key] = value if setting is None else setting.validate(value)

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
        self._keys.note_declared(key)
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

        The plugins are loaded first, so that their settings' defaults land
        and the keys written before are checked before the configuration locks.
        """
        _ = self.plugins
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

    # -- Redis (the pools live in wurk.redis.pools, reached through wurk.config.accessors) ----

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

    def use_shard(self, name: str) -> None:
        """Make shard ``name`` this configuration's main Redis: its options
        replace ``config.redis`` whole (nothing of the main server's carries
        over), and ``config["shard"]`` names it. What a worker started with
        ``--shard NAME`` does at boot, and the command line's ``--pool NAME``."""
        self._check_frozen()
        options = self.shards.get(name) if isinstance(name, str) else None
        if options is None:
            from wurk.config.shards import unknown_shard

            raise unknown_shard(name, self.shards)
        self["shard"] = name
        self._redis = {"url": None, **options}
        self.reset_redis_pools()

    def reset_after_fork(self) -> None:
        """In a forked child: let go of what belongs to the parent process.

        :mod:`wurk.config.forking` calls this before the ``fork`` event. Every pool
        keeps its identity but reconnects afresh, scripts are loaded again,
        the statsd client is rebuilt from ``dogstatsd`` on next use, the
        outage log starts with no outage, and the parent worker's counters
        are no longer registered: the child's own launcher registers its own.
        """
        self._lock = threading.RLock()  # a parent thread may have held it
        self._pools.reset_after_fork()
        if self._scripts is not None:
            self._scripts.reset_after_fork()
        self._statsd.reset_after_fork()
        self.outage_log = OutageLog(self)
        self._services.reset_after_fork()
        self._events.reset_after_fork()

    # -- errors ---------------------------------------------------------------

    def handle_exception(self, exc: BaseException, context: dict[str, Any] | None = None) -> None:
        """Run every error handler; one that raises is logged and skipped."""
        ctx = dict(context or {})
        for handler in list(self.error_handlers):
            try:
                handler(exc, ctx, self)
            except Exception as handler_exc:
                self.logger.error("error_handler raised: %r", handler_exc)

    # -- services, logger --------------------------------------------------

    def register(self, name: str, service: Any) -> None:
        """Store an extension service under ``name`` (a service locator)."""
        self._services.register(name, service)

    def lookup(self, name: str, default_factory: Callable[[Config], Any] | None = None) -> Any:
        return self._services.lookup(name, default_factory)

    @property
    def logger(self) -> logging.Logger:
        if self._logger is None:
            from wurk.server.logger import build_logger

            self._logger = build_logger()
        return self._logger

    @logger.setter
    def logger(self, logger: logging.Logger) -> None:
        self._logger = logger

    # -- plugins, settings, scripts, job options --------------------------------

    @property
    def plugins_loaded(self) -> bool:
        """Whether the plugins have loaded (and so installed their middleware),
        asked without loading them."""
        return self._plugins is not None

    @property
    def plugins(self) -> Plugins:
        """The plugin manager, loaded (and the plugins' hooks run) on first use."""
        with self._lock:
            if self._plugins is None:
                from wurk.plugins.manager import Plugins

                plugins = Plugins(self._options["disabled_plugins"], named=self._options.get("plugins") or ())
                self._adopt(plugins)
                return plugins
            return self._plugins

    def use_plugins(self, plugins: Plugins) -> None:
        """Adopt an already-built plugin manager (tests, embedding hosts)."""
        with self._lock:
            self._scripts = None
            self._job_options_registry = None
            self._adopt(plugins)

    def _adopt(self, plugins: Plugins) -> None:
        """Collect the plugins' settings, run ``wurk_configure`` (the keys
        plugins write there count as theirs) and ``wurk_register_middleware``,
        then check the keys written before the plugins loaded."""
        settings = SettingRegistry()
        plugins.call.register_settings(settings)
        self._plugins = plugins
        self._keys.adopt(settings, self._options)
        with self._keys.declaring():
            plugins.call.configure(self)
        plugins.call.register_middleware(self._client_chain, self._server_chain, self)
        self._events.attach(plugins)
        for warning in plugins.unknown_disabled():
            self.logger.warning(warning)
        self._keys.check_pending(self._options)

    @property
    def settings(self) -> SettingRegistry:
        """Every declared setting, core's and the active plugins' (loads them)."""
        _ = self.plugins
        return self._keys.settings

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
                registry.refuse_switched_off(self.plugins.switched_off())
                self._job_options_registry = registry
            return self._job_options_registry


# The process default is built from this class; registered here so that
# ``wurk.config.defaults``, read by the client and the data API, stays a leaf.
defaults.provide(Config)
