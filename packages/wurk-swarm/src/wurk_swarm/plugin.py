"""The wurk-swarm plugin: the forking supervisor behind ``wurkswarm``.

Contributes the swarm's configuration defaults; the supervisor and the
``wurkswarm`` console script arrive with the feature.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from wurk.hookspecs import hookimpl

if TYPE_CHECKING:
    from wurk.config import Config

#: Seconds the swarm parent waits past the shutdown timeout before it KILLs a child.
SHUTDOWN_GRACE = 5


@hookimpl
def wurk_configure(config: Config) -> None:
    config.setdefault("swarm_shutdown_grace", SHUTDOWN_GRACE)
