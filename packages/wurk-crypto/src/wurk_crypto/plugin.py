"""The wurk-crypto plugin: encrypted job arguments.

Owns the ``encrypt`` job option, so that a job asking for encryption can never
be pushed in clear text because the plugin is missing or switched off. The
encrypting middleware arrives with the feature.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from wurk.hookspecs import hookimpl

if TYPE_CHECKING:
    from wurk.options import OptionRegistry


@hookimpl
def wurk_register_options(options: OptionRegistry) -> None:
    options.add("encrypt", owner="wurk-crypto")
