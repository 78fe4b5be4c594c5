"""Core's own plugin: the built-ins, registered through the same hooks as any
feature package (under the name ``core``, which cannot be switched off).

Execution metrics ride on the lifecycle hooks: the counts are flushed on
every heartbeat (when due) and once more at exit."""

from __future__ import annotations

from typing import TYPE_CHECKING

from wurk.plugins.hookspecs import hookimpl

if TYPE_CHECKING:
    from wurk.client.middleware import Chain
    from wurk.config.configuration import Config
    from wurk.config.options import OptionRegistry
    from wurk.config.settings import SettingRegistry
    from wurk.plugins.component import ComponentRegistry
    from wurk.redis.scripts import ScriptRegistry
    from wurk.server.runtime import Runtime


@hookimpl
def wurk_register_scripts(scripts: ScriptRegistry) -> None:
    scripts.register_package("wurk.redis", namespace="core")


@hookimpl
def wurk_register_options(options: OptionRegistry) -> None:
    from wurk.server.profiler import check_token

    options.add("profile", "wurk-core", coerce=check_token)


@hookimpl
def wurk_register_settings(settings: SettingRegistry) -> None:
    from wurk.config.settings import declare_core_settings

    declare_core_settings(settings)


@hookimpl(tryfirst=True)
def wurk_register_middleware(client: Chain, server: Chain, config: Config) -> None:
    from wurk.server.builtin_middleware import Expiry, InterruptHandler

    server.prepend(InterruptHandler)
    if not server.exists(Expiry):
        server.add(Expiry)
    from wurk.metrics import History, Statsd

    for metrics in (Statsd, History):
        if not server.exists(metrics):
            server.add(metrics)
    from wurk.server.propagation import install

    install(client, server)  # only once wurk.propagate declared a variable


@hookimpl
def wurk_beat(config: Config) -> None:
    from wurk.metrics import flush_on_beat

    flush_on_beat(config)


@hookimpl
def wurk_exit(config: Config) -> None:
    from wurk.metrics import flush_at_exit

    flush_at_exit(config)


@hookimpl(tryfirst=True)
def wurk_register_components(components: ComponentRegistry, runtime: Runtime) -> None:
    """Core's own threads: the heartbeat first, so the process is visible
    before anything else acts; the health check last, so "ready" means all
    the rest runs."""
    from wurk.metrics.rollup import MetricsRollup
    from wurk.server.heartbeat import Heartbeat
    from wurk.server.reaper import Reaper
    from wurk.server.scheduled import Poller

    config = runtime.config
    served = list(dict.fromkeys(name for capsule in config.capsules.values() for name in capsule.weights))
    components.add(Heartbeat(runtime), first=True)
    components.add(Poller(config))
    components.add(Reaper(config, runtime.identity, served))
    components.add(runtime.leader)
    components.add(MetricsRollup(config))  # acts only while this process leads
    options = config.option("health_check_options")
    if options:
        from wurk.server.health import HealthCheck

        components.add(HealthCheck(runtime, **options), last=True)
