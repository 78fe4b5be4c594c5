"""The wurk-limiter plugin: its Lua scripts, its server middleware and the
dashboard's Limiters page.

Switched off with ``WURK_DISABLE_PLUGINS=limiter``: limiters then refuse to
run (their scripts are not registered) and nothing catches ``OverLimit``.
"""

from __future__ import annotations

from typing import Any

import wurk
from wurk.client.middleware import Chain
from wurk.plugins.web import WebRegistry
from wurk.redis.scripts import ScriptRegistry
from wurk.server.builtin_middleware import Expiry

#: The plugin API this plugin was built for; core refuses to load it if it
#: provides another major, or an older minor (see ``wurk.PLUGIN_API``).
WURK_PLUGIN_API = (1, 8)  # Skip(log_as=, rescheduled=)


@wurk.hookimpl
def wurk_register_scripts(scripts: ScriptRegistry) -> None:
    scripts.register_package("wurk_limiter", namespace="limiter")


@wurk.hookimpl
def wurk_register_middleware(client: Chain, server: Chain, config: Any) -> None:
    from wurk_limiter.middleware import LimiterMiddleware

    if server.exists(LimiterMiddleware):
        return
    # Inside Expiry (an expired job is dropped before it can be limited) and
    # so inside any batch middleware, which sits outside Expiry.
    if server.exists(Expiry):
        server.insert_after(Expiry, LimiterMiddleware)
    else:
        server.add(LimiterMiddleware)


@wurk.hookimpl
def wurk_register_web(app: WebRegistry) -> None:
    # Imported here: a worker never builds the dashboard.
    from wurk_limiter.dashboard import register

    register(app)
