"""Who owns which configuration setting, its default and its check.

The configuration is an open hash: third-party middleware reads keys of its
own, so an unknown key is stored, never refused. What the hash cannot know by
itself is which keys mean something, what they start as and which values are
wrong. Each owner says so once, in a :class:`SettingRegistry`: core for its
own keys (:func:`declare_core_settings`), every plugin through the
``wurk_register_settings`` hook::

    from wurk.config.settings import SettingRegistry, whole_number

    @wurk.hookimpl
    def wurk_register_settings(settings: SettingRegistry) -> None:
        settings.add("invoice_batch_size", default=100, check=whole_number(1), owner="acme-invoices")

From then on ``config["invoice_batch_size"]`` reads 100 until set, a bad value
is refused naming the key and the value, and ``invoice_batch_sise`` is
reported as a likely misspelling of it.

Core lists none of the features' settings. Setting one while its plugin is
not loaded would silently do nothing, so each distribution also names the
settings its plugin declares as entry points of the ``wurk.config.settings`` group
(:data:`SETTINGS_ENTRY_POINT_GROUP`), metadata that core reads without
importing the plugin: the configuration then says which distribution the key
belongs to, as the job options of :mod:`wurk.config.options` do. It warns rather
than refuses: one settings file is often shared by processes that install
different features.
"""

from __future__ import annotations

import copy
import importlib.util
import inspect
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from importlib import metadata
from typing import Any, Final

from wurk.config import shards
from wurk.errors import ConfigurationError, PluginError

#: Lifecycle events in the order a worker process goes through them. Each has a
#: ``wurk_<event>(config)`` hook (:mod:`wurk.plugins.hookspecs`), and
#: ``config.on(event, ...)`` takes a callback for it.
LIFECYCLE_EVENTS = (
    "startup",
    "before_fork",
    "fork",
    "quiet",
    "shutdown",
    "exit",
    "heartbeat",
    "beat",
    "leader",
    "leader_lost",
)


def check_event(event: str) -> None:
    """Refuse a lifecycle event name that is not one of :data:`LIFECYCLE_EVENTS`."""
    if event not in LIFECYCLE_EVENTS:
        raise ConfigurationError(f"unknown lifecycle event {event!r}; expected one of {', '.join(LIFECYCLE_EVENTS)}")


def is_dotted_name(name: Any) -> bool:
    """Whether ``name`` reads as a dotted module name (``myapp.jobs``)."""
    return isinstance(name, str) and bool(name) and all(part.isidentifier() for part in name.split("."))


def check_module_names(key: str, value: Any) -> list[str]:
    """``value`` as a list of dotted module names, or a ConfigurationError.

    A lone string is refused rather than split into characters: YAML's
    ``job_packages: myapp.jobs`` is an easy slip for a one-item list.
    """
    if isinstance(value, str | bytes) or not isinstance(value, Iterable):
        raise ConfigurationError(f"{key} must be a list of package names such as ['myapp.jobs'], got {value!r}")
    names = list(value)
    for name in names:
        if not is_dotted_name(name):
            raise ConfigurationError(f"{key}: {name!r} is not a dotted module name such as 'myapp.jobs'")
    return names


#: The ``statsd`` setting's keys and their defaults.
STATSD_DEFAULTS: dict[str, Any] = {"host": "localhost", "port": 8125, "prefix": None, "dogstatsd": False, "tags": []}


def check_statsd(key: str, value: Any) -> dict[str, Any] | None:
    """The check of the ``statsd`` setting: ``None`` (off), or a mapping of
    ``host``, ``port``, ``prefix``, ``dogstatsd`` and ``tags``; its normal
    form has every key. The client's package must be installed: a worker
    that only found out at its first job would run without metrics."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise ConfigurationError(f"{key} must be a mapping of host, port, prefix, dogstatsd and tags; got {value!r}")
    unknown = sorted(str(name) for name in value if name not in STATSD_DEFAULTS)
    if unknown:
        raise ConfigurationError(f"{key} has unknown keys {unknown}; it takes {sorted(STATSD_DEFAULTS)}")
    setting = {**STATSD_DEFAULTS, **value}
    host, port, prefix, dogstatsd, tags = (setting[name] for name in ("host", "port", "prefix", "dogstatsd", "tags"))
    if not isinstance(host, str) or not host:
        raise ConfigurationError(f"{key}.host must be a host name or address, got {host!r}")
    if isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536:
        raise ConfigurationError(f"{key}.port must be a port number from 1 to 65535, got {port!r}")
    if prefix is not None and (not isinstance(prefix, str) or not prefix):
        raise ConfigurationError(f"{key}.prefix must be a non-empty string or null, got {prefix!r}")
    if not isinstance(dogstatsd, bool):
        raise ConfigurationError(f"{key}.dogstatsd must be true or false, got {dogstatsd!r}")
    if not isinstance(tags, list | tuple) or not all(isinstance(tag, str) and tag for tag in tags):
        raise ConfigurationError(f"{key}.tags must be a list of strings such as 'env:prod', got {tags!r}")
    if tags and not dogstatsd:
        raise ConfigurationError(f"{key}.tags needs dogstatsd: true (plain statsd has no tags)")
    package, extra = ("datadog", "datadog") if dogstatsd else ("statsd", "'wurk-core[statsd]'")
    if importlib.util.find_spec(package) is None:
        raise ConfigurationError(f"{key} needs the {package} package, which is not installed: pip install {extra}")
    setting["tags"] = list(tags)
    return setting


#: The ``durable_push`` setting's keys and their defaults.
DURABLE_PUSH_DEFAULTS: dict[str, int] = {"replicas": 1, "timeout_ms": 1000}


def check_durable_push(key: str, value: Any) -> dict[str, int] | None:
    """The check of the ``durable_push`` setting: ``None`` or ``False`` (off), or a
    mapping of ``replicas`` (how many must confirm each push, default 1) and
    ``timeout_ms`` (how long a push waits for them, default 1000); its normal
    form has both keys. A timeout of 0 is refused: to ``WAIT`` it means
    forever, and a push that can hang forever is not what anyone asks for."""
    if value is None or value is False:
        return None
    if value is True:
        return dict(DURABLE_PUSH_DEFAULTS)
    if not isinstance(value, Mapping):
        raise ConfigurationError(f"{key} must be a mapping of replicas and timeout_ms (or null for off); got {value!r}")
    unknown = sorted(str(name) for name in value if name not in DURABLE_PUSH_DEFAULTS)
    if unknown:
        raise ConfigurationError(f"{key} has unknown keys {unknown}; it takes {sorted(DURABLE_PUSH_DEFAULTS)}")
    setting = {**DURABLE_PUSH_DEFAULTS, **value}
    for name, low in (("replicas", 1), ("timeout_ms", 1)):
        number = setting[name]
        if isinstance(number, bool) or not isinstance(number, int) or number < low:
            raise ConfigurationError(f"{key}.{name} must be a whole number >= {low}, got {number!r}")
    return setting


#: A setting's check: ``check(key, value)`` raises ConfigurationError, naming
#: the key and the value, when the value is wrong. It may return a normalised
#: form of the value (a list for a tuple), which is stored instead; returning
#: None stores the value as given.
Check = Callable[[str, Any], Any]

CORE = "wurk-core"


class _Unset:
    """The default of a setting that is known but unset until assigned."""

    def __repr__(self) -> str:
        return "UNSET"


UNSET: Final = _Unset()

#: The entry-point group in which a distribution names the settings its
#: plugin declares (``web_pool_size = "wurk_web.plugin"``): read without
#: importing anything, so that a setting whose plugin is switched off can name
#: its distribution. A hint and nothing more: the setting's default, check and
#: meaning are declared by its plugin, through ``wurk_register_settings``.
SETTINGS_ENTRY_POINT_GROUP = "wurk.settings"


def distribution_name(ep: metadata.EntryPoint) -> str:
    """The name of the distribution that publishes ``ep`` (its module's
    top-level package when the metadata does not say), by which the entry
    points of one distribution's groups are matched with each other."""
    dist = ep.dist
    return str(dist.metadata["Name"]) if dist is not None else ep.module.partition(".")[0]


def published_settings() -> dict[str, str]:
    """Each setting an installed distribution publishes, and that distribution's name."""
    published: dict[str, str] = {}
    for ep in metadata.entry_points(group=SETTINGS_ENTRY_POINT_GROUP):
        published.setdefault(ep.name, distribution_name(ep))
    return published


def positive_number(key: str, value: Any) -> Any:
    """A check: an int or float above zero (booleans are not numbers here)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise ConfigurationError(f"{key} must be a number > 0, got {value!r}")
    return value


def whole_number(minimum: int) -> Check:
    """A check: an int of at least ``minimum``."""

    def check(key: str, value: Any) -> Any:
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise ConfigurationError(f"{key} must be a whole number >= {minimum}, got {value!r}")
        return value

    return check


def optional(check: Check) -> Check:
    """A check that also accepts ``None`` (for settings where None means off)."""
    return lambda key, value: None if value is None else check(key, value)


def handler_list(key: str, handlers: Any) -> list[Any]:
    """A check: a list of callables (a lone string is not a list here)."""
    if isinstance(handlers, str | bytes) or not isinstance(handlers, Iterable):
        raise ConfigurationError(f"{key} must be a list of callables, got {handlers!r}")
    checked: list[Any] = list(handlers)
    for handler in checked:
        if not callable(handler):
            raise ConfigurationError(f"{key} must hold callables, got {handler!r}")
    return checked


def name_list(key: str, value: Any) -> list[str]:
    """A check: a list of non-empty strings (plugin names)."""
    if isinstance(value, str | bytes) or not isinstance(value, Iterable):
        raise ConfigurationError(f"{key} must be a list of names, got {value!r}")
    names = list(value)
    if not all(isinstance(name, str) and name.strip() for name in names):
        raise ConfigurationError(f"{key} must hold non-empty names, got {value!r}")
    return names


COMPLEX_ARGUMENT_MODES = ("raise", "warn", False)


def complex_arguments_mode(key: str, value: Any) -> Any:
    if value not in COMPLEX_ARGUMENT_MODES:
        raise ConfigurationError(f"{key} must be 'raise', 'warn' or False, got {value!r}")
    return value


@dataclass(frozen=True)
class Setting:
    """One declared setting: its default (:data:`UNSET` for none), its check,
    and the distribution that owns it (named in conflicts and hints)."""

    name: str
    default: Any = UNSET
    check: Check | None = None
    owner: str = CORE
    doc: str = ""
    #: Called for the value ``config[name]`` reads while the key is unset
    #: (an environment variable, read at each read so that the process's
    #: environment, not the moment the plugins loaded, decides).
    fallback: Callable[[], Any] | None = None

    @property
    def has_default(self) -> bool:
        return self.default is not UNSET

    def default_value(self) -> Any:
        """A fresh copy of the default, so that no two configurations share a
        list; callables (a reloader, a cleaner) are values and are not copied."""
        return self.default if callable(self.default) else copy.deepcopy(self.default)

    def validate(self, value: Any) -> Any:
        """The value to store, or a ConfigurationError naming the key, the value
        and, for a plugin's setting, the plugin.

        Whatever the check raises becomes that one error: a check that raises
        ``ValueError`` (or fails on a bug of its own) would otherwise end a
        worker's boot with a traceback through the configuration's code,
        where the one line the user needs is which setting was refused and
        by whom.
        """
        if self.check is None:
            return value
        try:
            checked = self.check(self.name, value)
        except ConfigurationError as exc:
            if self.owner != CORE:
                exc.args = (f"{exc} (a setting of {self.owner})",)
            raise
        except Exception as exc:
            raise ConfigurationError(
                f"{self.name} = {value!r} was refused by the check of {self.owner}: {type(exc).__name__}: {exc}"
            ) from exc
        return value if checked is None else checked


def _check_signature(name: str, check: Check, owner: str) -> None:
    """Refuse, as the plugin loads, a check that cannot take ``(name, value)``:
    found at the first write instead, it would fail some later boot, far from
    the plugin that declared it."""
    try:
        signature = inspect.signature(check)
    except (TypeError, ValueError):  # no signature to read (a builtin): its first call will tell
        return
    try:
        signature.bind(name, None)
    except TypeError:
        shown = getattr(check, "__qualname__", None) or repr(check)
        raise PluginError(
            f"{owner} declares setting {name!r} with the check {shown}{signature}, but a check is called "
            f"as check(name, value): fix the check, or switch the plugin off with WURK_DISABLE_PLUGINS"
        ) from None


def _calling_package(depth: int) -> str:
    """The top-level package of the module ``depth`` frames up, as a
    distribution-style name (``wurk_web`` → ``wurk-web``): the owner of a
    declaration that did not name one."""
    module = sys._getframe(depth + 1).f_globals.get("__name__", "")
    return str(module).partition(".")[0].replace("_", "-") or "unknown"


class SettingRegistry:
    """The settings declared by core and by the active plugins."""

    def __init__(self) -> None:
        self._settings: dict[str, Setting] = {}

    def add(
        self,
        name: str,
        *,
        default: Any = UNSET,
        check: Check | None = None,
        owner: str | None = None,
        doc: str = "",
        fallback: Callable[[], Any] | None = None,
    ) -> Setting:
        """Declare ``name``. ``owner`` names the distribution in messages; it
        defaults to the declaring module's top-level package. ``fallback``, for
        a setting without a default, gives what ``config[name]`` reads while
        the key is unset (``name in config`` stays false: nothing was assigned).

        A name already declared by another owner is refused: two plugins
        reading one key with different defaults or checks would each be wrong
        half the time, and which one wins would depend on load order.
        """
        if not isinstance(name, str) or not name:
            raise PluginError(f"a setting needs a non-empty name, got {name!r}")
        if check is not None and not callable(check):
            raise PluginError(f"setting {name!r}: check must be callable, got {check!r}")
        owner = owner or _calling_package(1)
        if check is not None:
            _check_signature(name, check, owner)
        if fallback is not None and (not callable(fallback) or default is not UNSET):
            raise PluginError(f"setting {name!r}: fallback must be a callable, for a setting without a default")
        current = self._settings.get(name)
        if current is not None and current.owner != owner:
            raise PluginError(f"setting {name!r} is declared by both {current.owner} and {owner}")
        setting = self._settings[name] = Setting(name, default, check, owner, doc, fallback)
        return setting

    def get(self, name: str) -> Setting | None:
        return self._settings.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._settings

    def __iter__(self) -> Iterator[Setting]:
        return iter(list(self._settings.values()))

    def names(self) -> frozenset[str]:
        return frozenset(self._settings)


#: Core's settings that every configuration starts with, each in its own copy.
DEFAULTS: dict[str, Any] = {
    "labels": set(),
    "require": ".",
    "environment": None,
    "concurrency": 5,
    # How many ``async def perform`` jobs a capsule runs at once on the
    # process's event loop, beside its ``concurrency`` threads.
    "async_concurrency": 100,
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
    # Sidekiq's own default, kept so a shared log reads alike: payload fields
    # copied into the log context when a job carries them.
    "logged_job_attributes": ["bid", "tags"],
    "redis_idle_timeout": None,
    "redis_error_handlers": [],
    # Off: a push returns once the primary has it (Sidekiq's promise).
    "durable_push": None,
}

#: Core's settings that are unset until assigned: their readers fall back to
#: a value of their own (``max_retries`` to 25, ``tag`` to the app directory).
RUNTIME_OPTIONS = (
    "queues",
    "capsules",
    "redis",
    "config_file",
    "tag",
    "identity",
    "verbose",
    "server",
    "disabled_plugins",
    "plugins",
    "max_retries",
    "fetch_class",
    "fetch_setup",
    "fetch_poll_interval",
    "scheduled_enq",
    "job_logger",
    "skip_default_job_logging",
    "scheduler_initial_wait",
    "heartbeat_interval",
    "metrics_rollup_interval",
    "metrics_flush_interval",
    "super_fetch_reaper_interval",
    "super_fetch_callback",
    "poison_pill_window",
    "poison_callbacks",
    "leader_ttl",
    "leader_renew_interval",
    "leader_follower_interval",
    "history_stream_cap",
    "health_check_options",
    "job_packages",
    "statsd",
)

# Checked on every write, through ``config[key] = ...`` as well as the named
# accessors, so that YAML and plugins cannot slip past them.
_CORE_CHECKS: dict[str, Check] = {
    "on_complex_arguments": complex_arguments_mode,
    "error_handlers": handler_list,
    "death_handlers": handler_list,
    "redis_error_handlers": handler_list,
    "fetch_poll_interval": positive_number,
    "async_concurrency": whole_number(1),
    "poison_pill_window": positive_number,
    "job_packages": optional(check_module_names),
    "plugins": name_list,
    "statsd": check_statsd,
    "durable_push": check_durable_push,
}


def declare_core_settings(settings: SettingRegistry) -> None:
    """Core's own declarations, made through core's plugin like any other's
    (and directly by a configuration, which needs them before plugins load)."""
    for name, default in DEFAULTS.items():
        settings.add(name, default=default, check=_CORE_CHECKS.get(name), owner=CORE)
    for name in RUNTIME_OPTIONS:
        settings.add(name, check=_CORE_CHECKS.get(name), owner=CORE)
    # Several Redis servers (wurk.config.shards): their names and connection
    # options, and the one this worker serves (``wurk --shard NAME``).
    settings.add(
        "shards",
        check=shards.check_shards,
        owner=CORE,
        doc="named Redis servers: name -> URL or connection options",
        fallback=shards.shards_from_env,
    )
    settings.add("shard", check=shards.check_name, owner=CORE, doc="the shard this worker serves as its main Redis")


def core_settings() -> SettingRegistry:
    """A registry holding core's settings alone."""
    registry = SettingRegistry()
    declare_core_settings(registry)
    return registry
