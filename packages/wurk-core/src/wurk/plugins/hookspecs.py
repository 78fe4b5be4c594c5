"""The hooks a Wurk plugin can implement.

Every feature of Wurk beyond the core job system (each of Wurk's own feature
distributions) attaches to core through these hooks and nothing else, and
third-party plugins use exactly the same surface. A plugin is a module (or
object) with functions decorated by :data:`wurk.hookimpl`, published under the
``wurk`` entry-point group::

    # mypackage/plugin.py
    import wurk

    @wurk.hookimpl
    def wurk_register_options(options):
        options.add("audit", owner="mypackage")

    # pyproject.toml
    [project.entry-points.wurk]
    audit = "mypackage.plugin"

Each registration hook receives a *registry object* rather than returning
values, so a hook can register several things and new registry methods never
change a hook's signature. Adding an argument to a hook is backwards compatible
(pluggy passes only the names an implementation asks for); renaming one is not.

Every hook is called through pluggy's hook caller, in pluggy's order (the
last registered plugin first, ``tryfirst`` / ``trylast`` moving one to the
front or the back), with wrappers (``wrapper=True``) around the rest and
pluggy's tracing watching. The lifecycle hooks (``wurk_startup`` …
``wurk_leader_lost``, through :meth:`wurk.plugins.manager.Plugins.fire`) and
``wurk_job_outcome`` are contained: an implementation that raises is reported
and the others still run (``startup`` excepted: its failure aborts the boot).

Core calls the registration hooks and ``wurk_job_outcome`` through one typed
wrapper, :class:`wurk.plugins.manager.HookCaller`, reached as ``config.plugins.call``
(``config.plugins.call.register_scripts(registry)``): one method per hook,
returning None, so every call site is checked against the arguments below.
``plugins.hook``, pluggy's untyped relay, is left for the hooks plugins offer
one another through ``wurk_addhooks``.

``wurk_register_web(app)`` receives a :class:`wurk.plugins.web.WebRegistry`
(``add_page``, ``add_api``, ``add_static``), a protocol defined in core so
that a feature package adds dashboard pages without importing ``wurk_web``;
its pages and routes are handed a :class:`wurk.plugins.web.WebRequest`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pluggy

from wurk.config.settings import LIFECYCLE_EVENTS as LIFECYCLE_EVENTS

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

PROJECT = "wurk"

hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)

# The lifecycle events, in the order a worker process goes through them, are
# named with the configuration (``config.on``); each has a ``wurk_<event>(config)``
# hook below.


@hookspec(historic=True)
def wurk_addhooks(pluginmanager: pluggy.PluginManager) -> None:
    """Add hookspecs of a plugin's own, so that plugins can extend plugins.

    Call ``pluginmanager.add_hookspecs(module)``. Historic: a plugin registered
    later still sees the call.
    """


@hookspec
def wurk_configure(config: Config) -> None:
    """Contribute configuration defaults.

    Called once when the configuration loads its plugins, before any user code
    reads it. Use ``config.setdefault(key, value)`` so that values the user set
    win over a plugin's defaults.
    """


@hookspec
def wurk_register_options(options: OptionRegistry) -> None:
    """Declare the job options this plugin owns (``unique_for``, ``encrypt``…).

    Core uses the declarations to tell a user who sets an option whose plugin
    is missing or disabled which distribution to install or enable. An option
    added with ``implemented=False`` is reserved for a feature still to come:
    a job that sets it is refused, so that it is never pushed as if honoured.
    ``coerce=`` gives an option a check that runs on every push that sets it
    (see :meth:`wurk.config.options.OptionRegistry.add`).
    """


@hookspec
def wurk_register_middleware(client: Chain, server: Chain, config: Config) -> None:
    """Add client and server middleware to the configuration's chains.

    ``client`` and ``server`` are the global chains; use ``add``, ``prepend``,
    ``insert_before`` or ``insert_after`` to place a middleware class exactly.
    """


@hookspec
def wurk_register_scripts(scripts: ScriptRegistry) -> None:
    """Register Lua scripts, usually ``scripts.register_package(__package__)``.

    Script names are namespaced (``"audit.record"``); the registry loads
    each script lazily, once per connection pool.
    """


@hookspec
def wurk_register_settings(settings: SettingRegistry) -> None:
    """Declare the configuration settings this plugin owns, with their
    defaults and validation (``settings.add("invoice_batch_size", default=100,
    check=whole_number(1))``), or a ``fallback`` read while unassigned.

    A declared setting is a known option: ``config["invoice_batch_size"]`` reads
    its default until set, a bad value is refused when it is set, and a key
    that is close to it is reported as a likely misspelling.
    """


@hookspec
def wurk_register_push_writers(writers: PushWriterRegistry, config: Config) -> None:
    """Take over how some payloads reach Redis (``writers.add(writer)``).

    Every write path (the client and bulk pushes, the transaction-aware
    client, the outage buffer, both scheduled-job promoters) routes each
    payload, after the client middleware, to the first writer that claims it,
    and to core's own pipelined write otherwise. A writer may also declare its
    payloads not replayable, so that they are never held back in the outage
    buffer nor deferred to a database commit. See :mod:`wurk.client.writers`.
    """


@hookspec
def wurk_register_components(components: ComponentRegistry, runtime: Runtime) -> None:
    """Add background components to a worker process (``components.add(c)``).

    Called once per worker process, after ``startup``, with the process's
    :class:`wurk.server.runtime.Runtime`. Components start in registration order
    (core's heartbeat first, its health check last) and stop in reverse,
    within the shutdown timeout. See :class:`wurk.plugins.component.Component`.
    """


@hookspec
def wurk_register_commands(cli: click.Group) -> None:
    """Add subcommands to the ``wurk`` command line (``cli.add_command(...)``)."""


@hookspec
def wurk_register_web(app: WebRegistry) -> None:
    """Add dashboard pages, JSON API routes and static files.

    ``app`` is the dashboard's registry object, provided by ``wurk-web`` and
    described by :class:`wurk.plugins.web.WebRegistry`. The dashboard calls the hook
    once per application it builds, for every enabled plugin; it is never
    called when the dashboard is not installed.
    """


@hookspec
def wurk_startup(config: Config) -> None:
    """A worker process is about to start its processor threads.

    Unlike the other lifecycle hooks, an exception here aborts the boot.
    """


@hookspec
def wurk_before_fork(config: Config) -> None:
    """The process is about to fork a child (in the parent, once per fork).

    Close what a child must not share: sockets, file handles opened for
    writing, threads' state. Core's own pools are reset in the child whatever
    a plugin does here.
    """


@hookspec
def wurk_fork(config: Config) -> None:
    """A child has just been forked (in the child; never fires in the parent).

    By then core has reset its per-process state (Redis pools, the script
    registry's record of loaded scripts, the statsd client, the event loop,
    log handlers' locks): reconnect what the plugin keeps of its own.
    """


@hookspec
def wurk_quiet(config: Config) -> None:
    """The process stopped fetching new jobs (TSTP or a dashboard quiet)."""


@hookspec
def wurk_shutdown(config: Config) -> None:
    """The process is draining its in-flight jobs before it stops."""


@hookspec
def wurk_exit(config: Config) -> None:
    """The process has finished its shutdown and is about to exit."""


@hookspec
def wurk_heartbeat(config: Config) -> None:
    """The first successful heartbeat, and the first one after an outage."""


@hookspec
def wurk_beat(config: Config) -> None:
    """Every heartbeat (every 10 seconds)."""


@hookspec
def wurk_leader(config: Config) -> None:
    """This process has just become the cluster leader."""


@hookspec
def wurk_leader_lost(config: Config) -> None:
    """This process has stopped being the cluster leader: it failed to renew in
    time (another process may lead now) or released the lead at shutdown. A
    component that acts only while leading stops acting before its next write."""


@hookspec
def wurk_job_outcome(outcome: Outcome, config: Config) -> None:
    """A job's result has been booked: it succeeded, a retry was scheduled, it
    died (``outcome.reason`` says why), it was rescheduled, or it was given
    back at shutdown. See :class:`wurk.plugins.outcomes.Outcome`.

    Fired once per run, after the booking and the death handlers, from where
    it happened: a worker's processor thread, the reaper (a poison pill), or
    the process that killed it through the API or the dashboard. Runs on the
    job's thread, so keep it short; an implementation that raises is reported
    and the others still run. When no plugin implements it, workers skip it
    entirely (they check once, at start).
    """
