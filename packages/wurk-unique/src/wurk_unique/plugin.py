"""The wurk-unique plugin: unique jobs, wired into core through its hooks.

* ``unique_for`` and ``unique_until`` are this plugin's job options, so a job
  setting them while the plugin is missing or switched off is refused with a
  hint naming wurk-unique, instead of being pushed without its lock; their
  values are checked (and a ``timedelta`` turned into seconds) on every push;
* the lock scripts (``unique.acquire``, ``unique.release``);
* once :func:`wurk_unique.enable` was called, every configuration that loads
  its plugins gets the middleware and the death handler (see
  :mod:`wurk_unique.state`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from wurk.plugins.hookspecs import hookimpl
from wurk_unique import state
from wurk_unique.middleware import coerce_unique_for, coerce_unique_until

if TYPE_CHECKING:
    from wurk.client.middleware import Chain
    from wurk.config.configuration import Config
    from wurk.config.options import OptionRegistry
    from wurk.redis.scripts import ScriptRegistry

#: The plugin API this plugin was built for; core refuses to load it if it
#: provides another major, or an older minor (see ``wurk.PLUGIN_API``).
#: 1.3: option coercers, and ``wurk.server.retry.death_reason()`` for the death handler.
WURK_PLUGIN_API = (1, 3)

OWNER = "wurk-unique"


@hookimpl
def wurk_register_options(options: OptionRegistry) -> None:
    options.add("unique_for", owner=OWNER, coerce=coerce_unique_for)
    options.add("unique_until", owner=OWNER, coerce=coerce_unique_until)


@hookimpl
def wurk_register_scripts(scripts: ScriptRegistry) -> None:
    scripts.register_package("wurk_unique", namespace="unique")


@hookimpl
def wurk_register_middleware(client: Chain, server: Chain, config: Config) -> None:
    if state.enabled():
        state.install(client, server, config)
