"""The wurk-cron plugin: periodic jobs, wired into core through its hooks.

* ``wurk_configure`` gives the configuration the service that keeps the
  ``config.periodic`` blocks;
* ``wurk_startup`` runs those blocks in a worker (registration, then the
  prune of superseded loops), so a bad schedule or class fails the boot;
* ``wurk_register_components`` adds the leader-gated :class:`Poller` to
  every worker process;
* the ``cron.advance`` script, the two settings and ``wurk cron`` complete it;
* ``wurk_register_web`` adds the dashboard's Cron pages (:mod:`wurk_cron.dashboard`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from wurk.config.settings import positive_number
from wurk.errors import ConfigurationError
from wurk.plugins.hookspecs import hookimpl
from wurk_cron.manager import SERVICE, Periodic, periodic_service
from wurk_cron.poller import Poller

if TYPE_CHECKING:
    import click

    from wurk.config.configuration import Config
    from wurk.config.settings import SettingRegistry
    from wurk.plugins.component import ComponentRegistry
    from wurk.plugins.web import WebRegistry
    from wurk.redis.scripts import ScriptRegistry
    from wurk.server.runtime import Runtime

#: The plugin API this plugin was built for; core refuses to load it if it
#: provides another major, or an older minor (see ``wurk.PLUGIN_API``).
WURK_PLUGIN_API = (1, 5)  # write fences, execute(once=)

#: Seconds between two cron ticks of the leader (the guides' ``cron_tick_interval``).
CRON_TICK_INTERVAL = 60
OWNER = "wurk-cron"


def _clock(key: str, value: Any) -> Any:
    if value is not None and not callable(value):
        raise ConfigurationError(f"{key} must be a callable returning epoch seconds (or None), got {value!r}")
    return value


@hookimpl
def wurk_register_settings(settings: SettingRegistry) -> None:
    settings.add(
        "cron_tick_interval",
        default=CRON_TICK_INTERVAL,
        check=positive_number,
        owner=OWNER,
        doc="Seconds between two cron ticks of the leader.",
    )
    settings.add(
        "cron_clock",
        default=None,
        check=_clock,
        owner=OWNER,
        doc="What the cron poller reads the time from (epoch seconds); time.time when unset. For tests.",
    )


@hookimpl
def wurk_configure(config: Config) -> None:
    if config.lookup(SERVICE) is None:
        config.register(SERVICE, Periodic(config))


@hookimpl
def wurk_register_scripts(scripts: ScriptRegistry) -> None:
    scripts.register_package("wurk_cron", namespace="cron")


@hookimpl
def wurk_startup(config: Config) -> None:
    periodic_service(config).run()


@hookimpl
def wurk_register_components(components: ComponentRegistry, runtime: Runtime) -> None:
    components.add(Poller(runtime.config))


@hookimpl
def wurk_register_commands(cli: click.Group) -> None:
    from wurk_cron.cli import cron_command

    cli.add_command(cron_command)


@hookimpl
def wurk_register_web(app: WebRegistry) -> None:
    # Imported here: a worker never builds the dashboard.
    from wurk_cron.dashboard import register

    register(app)
