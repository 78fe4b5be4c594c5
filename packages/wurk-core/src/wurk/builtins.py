"""Core's own plugin: the built-ins, registered through the same hooks as any
feature package (under the name ``core``, which cannot be switched off)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from wurk.hookspecs import hookimpl

if TYPE_CHECKING:
    from wurk.middleware import Chain
    from wurk.scripts import ScriptRegistry


@hookimpl
def wurk_register_scripts(scripts: ScriptRegistry) -> None:
    scripts.register_package("wurk", namespace="core")


@hookimpl(tryfirst=True)
def wurk_register_middleware(client: Chain, server: Chain, config: Any) -> None:
    from wurk.server_middleware import Expiry, InterruptHandler

    server.prepend(InterruptHandler)
    if not server.exists(Expiry):
        server.add(Expiry)
