"""The wurk-unique plugin: unique jobs.

Owns the ``unique_for`` and ``unique_until`` job options, so that core accepts
them only while this plugin is active (and names this distribution when it is
not). Until the lock middleware arrives, the options are reserved but not
implemented, so core refuses a job that sets them rather than push duplicates
the caller meant to be skipped; the feature flips ``implemented`` when it lands.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from wurk.hookspecs import hookimpl

if TYPE_CHECKING:
    from wurk.options import OptionRegistry

#: The plugin API this plugin was built for; core refuses to load it if it
#: provides another major, or an older minor (see ``wurk.PLUGIN_API``).
WURK_PLUGIN_API = (1, 0)


@hookimpl
def wurk_register_options(options: OptionRegistry) -> None:
    options.add("unique_for", owner="wurk-unique", implemented=False)
    options.add("unique_until", owner="wurk-unique", implemented=False)
