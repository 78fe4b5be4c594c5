"""Core's own plugin: the built-ins, registered through the same hooks as any
feature package (under the name ``core``, which cannot be switched off).

Execution metrics ride on the lifecycle hooks: the counts are flushed on
every heartbeat (when due) and once more at exit."""

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
    from wurk.metrics import History, Statsd

    for metrics in (Statsd, History):
        if not server.exists(metrics):
            server.add(metrics)


@hookimpl
def wurk_beat(config: Any) -> None:
    from wurk.metrics import flush_on_beat

    flush_on_beat(config)


@hookimpl
def wurk_exit(config: Any) -> None:
    from wurk.metrics import flush_at_exit

    flush_at_exit(config)
