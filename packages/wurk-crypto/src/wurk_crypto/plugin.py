"""The wurk-crypto plugin: encrypted job arguments.

Owns the ``encrypt`` job option, so that a job asking for encryption can never
be pushed in clear text because the plugin is missing or switched off. Until
the encrypting middleware arrives, the option is reserved but not implemented,
so core refuses such a job rather than push its arguments in clear text; the
feature flips ``implemented`` when it lands.
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
    options.add("encrypt", owner="wurk-crypto", implemented=False)
