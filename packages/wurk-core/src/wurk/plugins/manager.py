"""Discovery, switching off and calling of Wurk plugins.

One :class:`Plugins` object belongs to one configuration; there is no plugin
manager at module level, and nothing is discovered at import time. Plugins are
found through the ``wurk`` entry-point group, the entry point's name being the
plugin's name (``cron``, ``web``…). A plugin can be switched off without
uninstalling it, by name, from ``WURK_DISABLE_PLUGINS=cron,web`` or from
``config["disabled_plugins"]``; a switched-off plugin is never imported.
``WURK_DISABLE_PLUGIN_AUTOLOAD=1`` (as pytest's ``PYTEST_DISABLE_PLUGIN_AUTOLOAD``)
imports no entry point at all but those named in ``config["plugins"]``.

Every hook is called through pluggy's hook caller, so pluggy's order,
wrappers (``wrapper=True``, ``hookwrapper=True``) and tracing
(``add_hookcall_monitoring``) hold for all of them. pluggy stops a call at the
first implementation that raises; the lifecycle hooks and ``wurk_job_outcome``
promise more (a failing plugin is reported and the others still run), so each
of their implementations is registered *contained* (see :class:`_Manager`).

Core registers its own built-ins (``wurk.builtins``, under the name ``core``)
through the same hooks, and they cannot be switched off.

Plugins ship in distributions versioned apart from core, so each says which
plugin API it was built for, as a ``WURK_PLUGIN_API = (major, minor)``
attribute of the registered object (its ``plugin`` module, for the features).
A plugin built for another major, or for a minor newer than core's
:data:`PLUGIN_API`, is refused before it is registered, with a
:class:`~wurk.errors.PluginError` that says what to upgrade: a hook it relies
on may be missing or called differently, and failing at start-up beats
failing on the first job. A plugin that declares nothing is accepted, so a
third-party plugin written against the hooks alone keeps working; pluggy
still checks its hook names and arguments.
"""

from __future__ import annotations

import difflib
import functools
import logging
import os
from collections.abc import Callable, Iterable
from contextvars import ContextVar
from dataclasses import dataclass
from importlib import metadata
from types import ModuleType
from typing import TYPE_CHECKING, Any

import pluggy

from wurk._version import __version__
from wurk.config import env as wurk_env
from wurk.config.settings import distribution_name
from wurk.errors import PluginError
from wurk.plugins import hookspecs

if TYPE_CHECKING:
    import click

    from wurk.client.middleware import Chain
    from wurk.client.writers import PushWriterRegistry
    from wurk.config.configuration import Config
    from wurk.config.options import OptionRegistry
    from wurk.config.settings import SettingRegistry
    from wurk.plugins.component import ComponentRegistry
    from wurk.plugins.outcomes import Outcome
    from wurk.plugins.web import WebRegistry
    from wurk.redis.scripts import ScriptRegistry
    from wurk.server.runtime import Runtime

#: The plugin API this core provides, as ``(major, minor)``. The major number
#: goes up when a hook is removed or renamed, an argument renamed or dropped,
#: or a registry object loses a method: plugins built for the old major are
#: refused. The minor number goes up on additions (a new hook, argument or
#: registry method): plugins built for an older minor still load, plugins
#: built for a newer one are refused, since they may call what is missing.
#: A major bump ships only in a core release outside the compatible range the
#: feature distributions require (the next minor before 1.0, the next major
#: after), so pip and this check agree.
#: 1.1: wurk_job_outcome; 1.2: settings, push writers, components;
#: 1.3: PushWriter.origins, option coercers (``options.add(..., coerce=)``), wurk.server.retry.death_reason();
#: 1.4: a dashboard page's scripts and styles (``add_page(..., scripts=, styles=)``), WebRequest.int_param;
#: 1.5: write fences (``wurk.redis.fence``), ``RedisPool.execute(..., once=True)``, ``LostReplyError``, ``push_core``;
#: 1.6: hooks called through pluggy (wrappers run, pluggy's order), ``wurk.plugins.outcomes.add_reason``,
#: the ``wurk.config.settings`` entry-point group (feature settings named without importing the plugin);
#: 1.7: async jobs: a middleware's ``call_async``, ``wurk.server.retry.shutdown_of_task``,
#: ``wurk.server.loop.on_job_loop``;
#: 1.8: ``Skip(log_as=, rescheduled=)`` (the job log's line for a skipped run; a run put back to run later
#: is counted in ``stat:rescheduled``), the ``wurk.options`` entry-point group (a switched-off plugin's
#: job option refused at enqueue, naming the plugin);
#: 1.9: shards: ``wurk.via`` and ``wurk.shard``, ``config.shard(name)``, ``config.shards``, a shard's
#: name wherever a pool is accepted; ``WebRequest.pool`` is the pool of the request's shard.
PLUGIN_API: tuple[int, int] = (1, 9)

#: The attribute through which a plugin declares the plugin API it was built for.
PLUGIN_API_ATTRIBUTE = "WURK_PLUGIN_API"

ENTRY_POINT_GROUP = "wurk"
DISABLE_ENV = "WURK_DISABLE_PLUGINS"
#: Set (to anything but ``0``, ``false``, ``no``, ``off``): no entry point is
#: imported but those named in ``config["plugins"]``.
NO_AUTOLOAD_ENV = "WURK_DISABLE_PLUGIN_AUTOLOAD"
CORE_PLUGIN = "core"

#: The hooks whose implementations are contained: one that raises is reported
#: through the dispatch's ``config.handle_exception`` and the next still runs.
CONTAINED_HOOKS = frozenset({*(f"wurk_{event}" for event in hookspecs.LIFECYCLE_EVENTS), "wurk_job_outcome"})

logger = logging.getLogger("wurk.plugins")

#: Core's own plugin, :mod:`wurk.builtins`. It wires the server's components
#: and middleware and the metrics, which sit above this folder, so it is
#: handed down by ``wurk/__init__`` (which every ``wurk.*`` import runs first)
#: instead of imported from here.
_core_plugin: ModuleType | None = None


def provide_core_plugin(module: ModuleType) -> None:
    """Set the module registered as the ``core`` plugin of every configuration."""
    global _core_plugin
    _core_plugin = module


def core_plugin() -> ModuleType:
    if _core_plugin is None:  # wurk/__init__ provides it before anything can build a Config
        raise PluginError("core's plugin (wurk.builtins) was never provided: import wurk first")
    return _core_plugin


def parse_disabled(value: str | Iterable[str] | None) -> frozenset[str]:
    """Plugin names from a comma-separated string or an iterable of names."""
    if value is None:
        return frozenset()
    items = value.split(",") if isinstance(value, str) else value
    return frozenset(name.strip() for name in items if name and name.strip())


def declared_plugin_api(plugin: object, name: str) -> tuple[int, int] | None:
    """The ``(major, minor)`` a plugin was built for, or None if it declares none."""
    declared = getattr(plugin, PLUGIN_API_ATTRIBUTE, None)
    if declared is None:
        return None
    if (
        not isinstance(declared, tuple | list)
        or len(declared) != 2
        or not all(isinstance(part, int) and not isinstance(part, bool) and part >= 0 for part in declared)
    ):
        raise PluginError(f"plugin {name!r} declares {PLUGIN_API_ATTRIBUTE} = {declared!r}; expected (major, minor)")
    return (declared[0], declared[1])


def check_plugin_api(plugin: object, name: str, distribution: str | None, version: str | None) -> None:
    """Refuse a plugin built for a plugin API this core does not provide.

    The message names both API versions and the distribution to upgrade, since
    the person reading it is deploying, not writing the plugin.
    """
    declared = declared_plugin_api(plugin, name)
    if declared is None or (declared[0] == PLUGIN_API[0] and declared[1] <= PLUGIN_API[1]):
        return
    wanted = f"{declared[0]}.{declared[1]}"
    provided = f"{PLUGIN_API[0]}.{PLUGIN_API[1]}"
    who = f"plugin {name!r}" + (f" ({distribution} {version})" if distribution else "")
    if declared[0] < PLUGIN_API[0]:
        fix = (
            f"upgrade {distribution or 'the plugin'} to a release built for plugin API {PLUGIN_API[0]}.x, "
            f"or install a wurk-core that provides plugin API {declared[0]}.x"
        )
    else:
        fix = f"upgrade wurk-core to a release that provides plugin API {wanted} or a later {declared[0]}.x"
    raise PluginError(
        f"{who} was built for plugin API {wanted}, but wurk-core {__version__} provides plugin API {provided}: "
        f"{fix}; or switch it off with {DISABLE_ENV}={name}"
    )


@dataclass(frozen=True)
class SwitchedOff:
    """An installed plugin a configuration did not load: ``blocked`` when it
    was switched off by name (``WURK_DISABLE_PLUGINS``,
    ``config["disabled_plugins"]``), else left out of ``config["plugins"]``
    while ``WURK_DISABLE_PLUGIN_AUTOLOAD`` is set."""

    name: str
    distribution: str
    blocked: bool

    def how(self) -> str:
        """How it was switched off, and so how to switch it back on."""
        if self.blocked:
            return f"switched off by {DISABLE_ENV} or config['disabled_plugins']"
        return f"not loaded: {NO_AUTOLOAD_ENV} is set and config['plugins'] does not name it"


@dataclass(frozen=True)
class PluginInfo:
    """One discovered plugin, as ``wurk plugins`` shows it."""

    name: str
    distribution: str | None
    version: str | None
    enabled: bool
    module: str


@dataclass(frozen=True, slots=True)
class _Dispatch:
    """The contained call under way on this thread: whom to report to, and how
    to name it (``shutdown``, ``wurk_job_outcome``)."""

    label: str
    config: Config
    reraise: bool


_dispatch: ContextVar[_Dispatch | None] = ContextVar("wurk_plugin_dispatch", default=None)


def _contained(function: Callable[..., object], plugin_name: str) -> Callable[..., object]:
    """``function``, reporting what it raises through the dispatch under way."""

    @functools.wraps(function)
    def contained(*args: object, **kwargs: object) -> object:
        try:
            return function(*args, **kwargs)
        except Exception as exc:
            dispatch = _dispatch.get()
            if dispatch is None or dispatch.reraise:
                raise
            dispatch.config.handle_exception(exc, {"context": f"plugin {plugin_name} on {dispatch.label}"})
            return None

    return contained


class _Manager(pluggy.PluginManager):
    """pluggy's plugin manager, whose contained hooks keep going past a failure.

    pluggy runs a hook's implementations in one loop that the first exception
    ends. Core's lifecycle hooks and ``wurk_job_outcome`` promise that a
    failing plugin is reported and the others still run, so each of their
    implementations, as it is registered, is swapped for one that calls it and
    reports what it raises through the dispatch under way
    (:meth:`Plugins.fire`, ``plugins.call.job_outcome``). pluggy still calls
    every one of them: in its order, inside the wrappers, under its tracing.
    Wrappers are left as written: pluggy hands them the call's outcome.
    Called on pluggy's relay outside such a dispatch, an implementation's
    exception propagates as pluggy has it.
    """

    def register(self, plugin: object, name: str | None = None) -> str | None:
        registered = super().register(plugin, name)
        if registered is not None:
            for caller in self.get_hookcallers(plugin) or ():
                if caller.name not in CONTAINED_HOOKS:
                    continue
                for impl in caller.get_hookimpls():
                    if impl.plugin is plugin and not (impl.wrapper or impl.hookwrapper):
                        # pluggy declares the attribute Final; it is read at each call.
                        impl.function = _contained(impl.function, impl.plugin_name)  # type: ignore[misc]
        return registered


class HookCaller:
    """The typed way to call the registration and notification hooks.

    Reached as ``plugins.call`` (``config.plugins.call.register_scripts(registry)``):
    one method per hook of :mod:`wurk.plugins.hookspecs`, each a thin call through
    pluggy, so that callers are type-checked against the hooks' arguments and
    never handle pluggy's untyped results. Registration hooks let an
    implementation's exception propagate (a plugin that cannot register
    fails the start-up); ``job_outcome`` is contained: a failing listener is
    reported and the others still hear it. Lifecycle events go through
    :meth:`Plugins.fire`.
    """

    __slots__ = ("_plugins",)

    def __init__(self, plugins: Plugins) -> None:
        self._plugins = plugins

    def configure(self, config: Config) -> None:
        self._plugins.manager.hook.wurk_configure(config=config)

    def register_options(self, options: OptionRegistry) -> None:
        self._plugins.manager.hook.wurk_register_options(options=options)

    def register_middleware(self, client: Chain, server: Chain, config: Config) -> None:
        self._plugins.manager.hook.wurk_register_middleware(client=client, server=server, config=config)

    def register_scripts(self, scripts: ScriptRegistry) -> None:
        self._plugins.manager.hook.wurk_register_scripts(scripts=scripts)

    def register_settings(self, settings: SettingRegistry) -> None:
        self._plugins.manager.hook.wurk_register_settings(settings=settings)

    def register_push_writers(self, writers: PushWriterRegistry, config: Config) -> None:
        self._plugins.manager.hook.wurk_register_push_writers(writers=writers, config=config)

    def register_components(self, components: ComponentRegistry, runtime: Runtime) -> None:
        self._plugins.manager.hook.wurk_register_components(components=components, runtime=runtime)

    def register_commands(self, cli: click.Group) -> None:
        self._plugins.manager.hook.wurk_register_commands(cli=cli)

    def register_web(self, app: WebRegistry) -> None:
        self._plugins.manager.hook.wurk_register_web(app=app)

    def job_outcome(self, outcome: Outcome, config: Config) -> None:
        self._plugins._contained_call("wurk_job_outcome", "wurk_job_outcome", {"outcome": outcome, "config": config})


class Plugins:
    """The plugin manager of one Wurk configuration.

    ``disabled`` adds to the names read from ``WURK_DISABLE_PLUGINS``. Pass
    ``entry_points=False`` to get core's built-ins only (tests that want a
    precise set of plugins register the rest by hand). ``named`` are the
    plugins ``config["plugins"]`` names: with ``WURK_DISABLE_PLUGIN_AUTOLOAD``
    set, they are the only entry points loaded.
    """

    def __init__(
        self,
        disabled: Iterable[str] = (),
        *,
        entry_points: bool = True,
        environ: dict[str, str] | None = None,
        named: Iterable[str] = (),
    ) -> None:
        env = os.environ if environ is None else environ
        self._disabled_by = dict.fromkeys(parse_disabled(disabled), "config['disabled_plugins']")
        self._disabled_by.update(dict.fromkeys(parse_disabled(env.get(DISABLE_ENV)), DISABLE_ENV))
        self.disabled = frozenset(self._disabled_by)
        self._entry_points = entry_points
        if CORE_PLUGIN in self.disabled:
            raise PluginError("the core plugin cannot be disabled")
        #: Published plugins not loaded: name -> why (see :meth:`switched_off`).
        self._switched_off: dict[str, SwitchedOff] = {}
        self._pm = _Manager(hookspecs.PROJECT)
        self._pm.add_hookspecs(hookspecs)
        # Historic: every plugin registered from now on gets the call too.
        self._pm.hook.wurk_addhooks.call_historic(kwargs={"pluginmanager": self._pm})
        self._pm.register(core_plugin(), name=CORE_PLUGIN)
        for name in self.disabled:
            self._pm.set_blocked(name)
        if entry_points:
            self._load_entry_points(parse_disabled(named), autoload=not wurk_env.truthy(env.get(NO_AUTOLOAD_ENV)))
        self._validate()
        #: The typed hook caller: ``plugins.call.register_scripts(registry)``.
        self.call = HookCaller(self)

    def _load_entry_points(self, named: frozenset[str], *, autoload: bool) -> None:
        """Import and register the ``wurk`` entry points: all of them, or with
        autoload off the ``named`` ones; a named plugin that no installed
        distribution publishes is an error, not a plugin quietly missing."""
        # pluggy's load_setuptools_entrypoints registers as it imports; the
        # plugin API has to be checked in between, so the loop is ours.
        published = metadata.entry_points(group=ENTRY_POINT_GROUP)
        missing = sorted(named - set(published.names) - {CORE_PLUGIN})
        if missing:
            raise PluginError(
                f"config['plugins'] names {', '.join(map(repr, missing))}, but no installed distribution "
                f"publishes a wurk plugin of that name (see `wurk plugins`)"
            )
        for ep in published:
            if self._pm.has_plugin(ep.name):
                continue  # a duplicate on sys.path
            if self._pm.is_blocked(ep.name) or (not autoload and ep.name not in named):
                # Switched off, or autoload is off and the configuration does
                # not name it: never imported, but remembered, so that a job
                # option it publishes can be refused naming it.
                self._switched_off.setdefault(
                    ep.name, SwitchedOff(ep.name, distribution_name(ep), blocked=self._pm.is_blocked(ep.name))
                )
                continue
            try:
                plugin = ep.load()
            except Exception as exc:  # an ImportError or a failing plugin module
                raise PluginError(f"a wurk plugin failed to load: {exc!r}") from exc
            dist = ep.dist
            check_plugin_api(plugin, ep.name, dist.metadata["Name"] if dist else None, dist.version if dist else None)
            try:
                self._pm.register(plugin, name=ep.name)
            except ValueError as exc:  # pluggy refuses an object registered under two names
                raise PluginError(f"a wurk plugin failed to load: {exc!r}") from exc

    def switched_off_by(self, name: str) -> str | None:
        """Where plugin ``name`` was switched off (``WURK_DISABLE_PLUGINS`` or
        ``config['disabled_plugins']``), or None if it was not."""
        return self._disabled_by.get(name)

    def unknown_disabled(self) -> list[str]:
        """A warning for each name given to switch a plugin off that no
        installed plugin has, with the nearest one's name.

        A misspelt name would otherwise switch nothing off, silently: the
        plugin the user meant keeps running. The distribution's name is the
        likeliest slip (``wurk-limiter`` for ``limiter``), so the nearest
        name is looked for among both.
        """
        if not self._entry_points:
            return []  # plugins registered by hand: there is no list to hold the names against
        published = {
            ep.name: ep.dist.metadata["Name"] if ep.dist else None
            for ep in metadata.entry_points(group=ENTRY_POINT_GROUP)
        }
        by_alias = {name: name for name in published}
        by_alias.update({dist: name for name, dist in published.items() if dist})
        warnings = []
        for name, source in sorted(self._disabled_by.items()):
            if name in published:
                continue
            close = difflib.get_close_matches(name, by_alias, n=1)
            hint = "`wurk plugins` lists their names"
            if close:
                nearest = by_alias[close[0]]
                hint = f"did you mean {nearest!r}" + (f" (of {published[nearest]})?" if published[nearest] else "?")
            warnings.append(f"{source}: no installed plugin is called {name!r}, so it switches nothing off; {hint}")
        return warnings

    def _validate(self) -> None:
        try:
            self._pm.check_pending()
        except pluggy.PluginValidationError as exc:
            raise PluginError(str(exc)) from exc

    @property
    def hook(self) -> pluggy.HookRelay:
        """pluggy's hook relay, for hooks that plugins offer to each other
        through ``wurk_addhooks`` (core knows nothing of their results); core
        calls its own hooks through :attr:`call`, never through this."""
        return self._pm.hook

    def implemented(self, hook: str) -> bool:
        """Whether any registered plugin implements core's hook ``hook``
        (``"wurk_job_outcome"``). The hot path asks this once and keeps the
        answer, so that nobody listening costs nothing per job."""
        if not hook.startswith("wurk_") or not hasattr(hookspecs, hook):
            raise ValueError(f"{hook!r} is not one of core's hooks")
        return bool(self._caller(hook).get_hookimpls())

    def _caller(self, hook: str) -> pluggy.HookCaller:
        # The one place a hook is looked up by name: the lifecycle events and
        # the contained notifications are dispatched by their hook's name.
        caller: pluggy.HookCaller = getattr(self._pm.hook, hook)
        return caller

    @property
    def manager(self) -> pluggy.PluginManager:
        return self._pm

    def register(self, plugin: object, name: str | None = None) -> str:
        """Register a plugin object by hand and validate its hooks and plugin API at once."""
        check_plugin_api(plugin, name or str(getattr(plugin, "__name__", repr(plugin))), None, None)
        registered = self._pm.register(plugin, name=name)
        if registered is None:
            raise PluginError(f"plugin {name or plugin!r} is disabled or already registered")
        try:
            self._pm.check_pending()
        except pluggy.PluginValidationError as exc:
            self._pm.unregister(plugin)
            raise PluginError(str(exc)) from exc
        return registered

    def unregister(self, name: str) -> None:
        if name == CORE_PLUGIN:
            raise PluginError("the core plugin cannot be unregistered")
        self._pm.unregister(name=name)

    def names(self) -> list[str]:
        """Names of the registered (enabled) plugins, core first; the
        ``config.on`` callbacks riding the same dispatch are not plugins."""
        from wurk.plugins.events import NAME_PREFIX

        return [
            name
            for name, plugin in self._pm.list_name_plugin()
            if plugin is not None and not name.startswith(NAME_PREFIX)  # None: a disabled (blocked) plugin
        ]

    def is_enabled(self, name: str) -> bool:
        return self._pm.get_plugin(name) is not None

    def switched_off(self) -> list[SwitchedOff]:
        """The installed plugins this configuration did not load: switched
        off by name, or left out of ``config["plugins"]`` with autoload off."""
        return [off for name, off in self._switched_off.items() if not self.is_enabled(name)]

    def discovered(self) -> list[PluginInfo]:
        """Every plugin published under the entry-point group, enabled or not."""
        found: list[PluginInfo] = []
        seen: set[str] = set()
        for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
            if ep.name in seen:
                continue
            seen.add(ep.name)
            dist = ep.dist
            found.append(
                PluginInfo(
                    name=ep.name,
                    distribution=dist.metadata["Name"] if dist else None,
                    version=dist.version if dist else None,
                    enabled=self.is_enabled(ep.name),
                    module=ep.value,
                )
            )
        by_name = {info.name for info in found}
        for name, plugin in self._pm.list_name_plugin():
            # None: a switched-off name, which the loop above showed if a plugin has it.
            if name not in by_name and name != CORE_PLUGIN and plugin is not None:
                module = plugin.__name__ if isinstance(plugin, ModuleType) else type(plugin).__qualname__
                found.append(PluginInfo(name, None, None, True, module))
        return sorted(found, key=lambda info: info.name)

    def fire(self, event: str, config: Config, *, reraise: bool = False) -> None:
        """Call the ``wurk_<event>`` hook through pluggy, a failing
        implementation reported through ``config.handle_exception`` and the
        rest still run, unless ``reraise`` (used for ``startup``, whose failure
        must abort the boot).

        The order is pluggy's, the same for every event: the last registered
        plugin first (core, registered first, runs last), ``tryfirst`` and
        ``trylast`` moving one to the front or the back, wrappers around
        them all. The ``config.on`` callbacks keep Sidekiq's order within
        that (see :mod:`wurk.plugins.events`).
        """
        if event not in hookspecs.LIFECYCLE_EVENTS:
            raise ValueError(f"unknown lifecycle event {event!r}; expected one of {hookspecs.LIFECYCLE_EVENTS}")
        self._contained_call(f"wurk_{event}", event, {"config": config}, reraise=reraise)

    def _contained_call(self, hook: str, label: str, arguments: dict[str, Any], *, reraise: bool = False) -> None:
        """Call one of the contained hooks (:data:`CONTAINED_HOOKS`) through
        pluggy's hook caller; a failure is reported in ``arguments["config"]`` as
        ``plugin <name> on <label>``. What a wrapper raises ends the call and
        is reported the same way (as ``plugins on <label>``)."""
        if hook not in CONTAINED_HOOKS:
            raise ValueError(f"{hook!r} is not a contained hook")
        config: Config = arguments["config"]
        token = _dispatch.set(_Dispatch(label, config, reraise))
        try:
            self._caller(hook)(**arguments)
        except Exception as exc:
            if reraise:
                raise
            config.handle_exception(exc, {"context": f"plugins on {label}"})
        finally:
            _dispatch.reset(token)
