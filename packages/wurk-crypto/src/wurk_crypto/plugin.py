"""The wurk-crypto plugin: encrypted job arguments, wired into core by hooks.

* the ``encrypt`` job option is this plugin's, so a job asking for encryption
  is never pushed in clear text because the plugin is missing or switched
  off: core refuses it with a hint naming wurk-crypto; and while encryption
  is not enabled in the process, the option's check refuses it too;
* once :func:`wurk_crypto.enable` was called, every configuration that loads
  its plugins gets the encrypting and decrypting middleware.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from wurk.plugins.hookspecs import hookimpl
from wurk_crypto import activation

if TYPE_CHECKING:
    from wurk.client.middleware import Chain
    from wurk.config.configuration import Config
    from wurk.config.options import OptionRegistry

#: The plugin API this plugin was built for; core refuses to load it if it
#: provides another major, or an older minor (see ``wurk.PLUGIN_API``).
#: 1.3: option coercers.
WURK_PLUGIN_API = (1, 3)


@hookimpl
def wurk_register_options(options: OptionRegistry) -> None:
    options.add("encrypt", owner="wurk-crypto", coerce=activation.coerce_encrypt)


@hookimpl
def wurk_register_middleware(client: Chain, server: Chain, config: Config) -> None:
    if activation.enabled():
        activation.install(client, server)
