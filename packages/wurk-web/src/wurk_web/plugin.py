"""The wurk-web plugin: the dashboard.

Declares the dashboard's settings; its pages, JSON API and the ``wurk web``
command arrive with the feature.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from wurk.hookspecs import hookimpl
from wurk.settings import whole_number

if TYPE_CHECKING:
    from wurk.settings import SettingRegistry

#: The plugin API this plugin was built for; core refuses to load it if it
#: provides another major, or an older minor (see ``wurk.PLUGIN_API``).
WURK_PLUGIN_API = (1, 2)

#: Connections in the dashboard's own Redis pool.
WEB_POOL_SIZE = 5


@hookimpl
def wurk_register_settings(settings: SettingRegistry) -> None:
    settings.add(
        "web_pool_size",
        default=WEB_POOL_SIZE,
        check=whole_number(1),
        owner="wurk-web",
        doc="Connections in the dashboard's Redis pool (wurk_web.redis_pool(config)).",
    )
