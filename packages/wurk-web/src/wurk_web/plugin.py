"""The wurk-web plugin: the dashboard.

Contributes the dashboard's configuration defaults; its pages, JSON API and
the ``wurk web`` command arrive with the feature.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from wurk.hookspecs import hookimpl

if TYPE_CHECKING:
    from wurk.config import Config

#: The plugin API this plugin was built for; core refuses to load it if it
#: provides another major, or an older minor (see ``wurk.PLUGIN_API``).
WURK_PLUGIN_API = (1, 0)

#: Connections in the dashboard's own Redis pool.
WEB_POOL_SIZE = 5


@hookimpl
def wurk_configure(config: Config) -> None:
    config.setdefault("web_pool_size", WEB_POOL_SIZE)
