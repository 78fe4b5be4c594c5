"""The wurk-cron plugin: periodic jobs.

Declares the cron tick cadence; the leader-gated ticker, the ``periodic`` keys
and ``config.periodic`` arrive with the feature.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from wurk.hookspecs import hookimpl
from wurk.settings import positive_number

if TYPE_CHECKING:
    from wurk.settings import SettingRegistry

#: The plugin API this plugin was built for; core refuses to load it if it
#: provides another major, or an older minor (see ``wurk.PLUGIN_API``).
WURK_PLUGIN_API = (1, 2)

#: Seconds between two cron ticks of the leader (the guides' ``cron_tick_interval``).
CRON_TICK_INTERVAL = 60


@hookimpl
def wurk_register_settings(settings: SettingRegistry) -> None:
    settings.add(
        "cron_tick_interval",
        default=CRON_TICK_INTERVAL,
        check=positive_number,
        owner="wurk-cron",
        doc="Seconds between two cron ticks of the leader.",
    )
