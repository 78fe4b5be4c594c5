"""The wurk-swarm plugin: the forking supervisor behind ``wurkswarm``.

Declares the swarm's settings; the supervisor and the ``wurkswarm`` console
script arrive with the feature.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from wurk.hookspecs import hookimpl
from wurk.settings import optional, positive_number, whole_number

if TYPE_CHECKING:
    from wurk.settings import SettingRegistry

#: The plugin API this plugin was built for; core refuses to load it if it
#: provides another major, or an older minor (see ``wurk.PLUGIN_API``).
WURK_PLUGIN_API = (1, 2)

#: Seconds the swarm parent waits past the shutdown timeout before it KILLs a child.
SHUTDOWN_GRACE = 5


@hookimpl
def wurk_register_settings(settings: SettingRegistry) -> None:
    settings.add(
        "swarm_shutdown_grace",
        default=SHUTDOWN_GRACE,
        check=positive_number,
        owner="wurk-swarm",
        doc="Seconds the parent waits past the shutdown timeout before it kills a child.",
    )
    # No default: unset, config.memory_limit_mb falls back to WURK_MAXMEM_MB,
    # while an assigned None or 0 switches recycling off whatever it says.
    settings.add(
        "memory_limit_mb",
        check=optional(whole_number(0)),
        owner="wurk-swarm",
        doc="RSS (MB) above which a child is recycled; None or 0 switches it off.",
    )
