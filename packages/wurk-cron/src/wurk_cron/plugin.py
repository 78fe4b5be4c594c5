"""The wurk-cron plugin: periodic jobs.

Contributes the cron tick cadence to the configuration; the leader-gated
ticker, the ``periodic`` keys and ``config.periodic`` arrive with the feature.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from wurk.hookspecs import hookimpl

if TYPE_CHECKING:
    from wurk.config import Config

#: The plugin API this plugin was built for; core refuses to load it if it
#: provides another major, or an older minor (see ``wurk.PLUGIN_API``).
WURK_PLUGIN_API = (1, 0)

#: Seconds between two cron ticks of the leader (the guides' ``cron_tick_interval``).
CRON_TICK_INTERVAL = 60


@hookimpl
def wurk_configure(config: Config) -> None:
    config.setdefault("cron_tick_interval", CRON_TICK_INTERVAL)
