"""The wurk-swarm plugin: the forking supervisor behind ``wurkswarm``.

Declares the swarm's settings (``topology``, ``memory_limit_mb``,
``swarm_shutdown_grace``, ``swarm_memory_interval``) and adds ``wurk swarm``,
the same command as the ``wurkswarm`` console script.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from wurk.config.settings import optional, positive_number, whole_number
from wurk.plugins.hookspecs import hookimpl
from wurk_swarm.memory import environment_limit_mb

if TYPE_CHECKING:
    import click

    from wurk.config.settings import SettingRegistry

#: The plugin API this plugin was built for; core refuses to load it if it
#: provides another major, or an older minor (see ``wurk.PLUGIN_API``).
WURK_PLUGIN_API = (1, 2)

#: Seconds the swarm parent waits past the shutdown timeout before it KILLs a child.
SHUTDOWN_GRACE = 5

#: Seconds between two RSS checks of the children.
MEMORY_INTERVAL = 10


@hookimpl
def wurk_register_settings(settings: SettingRegistry) -> None:
    settings.add(
        "swarm_shutdown_grace",
        default=SHUTDOWN_GRACE,
        check=positive_number,
        owner="wurk-swarm",
        doc="Seconds the parent waits past the shutdown timeout before it kills a child.",
    )
    # No default: unset, config["memory_limit_mb"] reads WURK_MAXMEM_MB (then
    # SIDEKIQ_MAXMEM_MB) at each read, while an assigned None or 0 switches
    # recycling off whatever the environment says.
    settings.add(
        "memory_limit_mb",
        check=optional(whole_number(0)),
        fallback=environment_limit_mb,
        owner="wurk-swarm",
        doc="RSS (MB) above which a child is recycled; None or 0 switches it off.",
    )
    settings.add(
        "swarm_memory_interval",
        default=MEMORY_INTERVAL,
        check=positive_number,
        owner="wurk-swarm",
        doc="Seconds between two checks of the children's RSS against memory_limit_mb.",
    )
    settings.add(
        "topology",
        default=None,
        check=_check_topology,
        owner="wurk-swarm",
        doc="A wurk_swarm.topology.Topology: the swarm's processes (supersedes WURK_COUNT).",
    )


def _check_topology(key: str, value: object) -> object:
    # Imported here: the plugin module stays light for `wurk plugins`.
    from wurk_swarm.topology import check_topology

    return check_topology(key, value)


@hookimpl
def wurk_register_commands(cli: click.Group) -> None:
    from wurk_swarm.cli import swarm_command

    cli.add_command(swarm_command())
