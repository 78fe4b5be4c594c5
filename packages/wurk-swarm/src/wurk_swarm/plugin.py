"""The wurk-swarm plugin: the forking supervisor behind ``wurkswarm``.

Contributes the swarm's configuration defaults; the supervisor and the
``wurkswarm`` console script arrive with the feature.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from wurk.hookspecs import hookimpl

if TYPE_CHECKING:
    from wurk.config import Config

#: The plugin API this plugin was built for; core refuses to load it if it
#: provides another major, or an older minor (see ``wurk.PLUGIN_API``).
WURK_PLUGIN_API = (1, 0)

#: Seconds the swarm parent waits past the shutdown timeout before it KILLs a child.
SHUTDOWN_GRACE = 5


@hookimpl
def wurk_configure(config: Config) -> None:
    config.setdefault("swarm_shutdown_grace", SHUTDOWN_GRACE)
