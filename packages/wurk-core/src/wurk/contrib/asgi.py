"""Wurk in an ASGI application (FastAPI, Starlette): settings, pushes from the
handlers, the dashboard at a prefix, and an embedded worker run by the
application's lifespan.

::

    wurk_lifespan = WurkLifespan({"queues": ["default"]}, embedded=True)
    app = FastAPI(lifespan=wurk_lifespan)
    mount_dashboard(app, wurk_web.create_app(wurk_lifespan.config), protect=is_admin)

The settings are the keys of the YAML file; a misspelt one is refused at
once. They go into the process default configuration unless one is given,
and ``perform_async`` in a handler pushes through the process default; with
a configuration of your own, add :class:`WurkMiddleware` so that every
request runs as it.

With ``embedded=True`` the lifespan starts an embedded worker (two threads
beside the event loop) before the first request and stops it at shutdown,
after the server stopped taking requests: the running jobs get the
configuration's ``timeout`` to finish and the rest go back to their queues,
as on any worker's shutdown. It is not started under ``WURK_DISABLED=1`` nor
in a gunicorn or uWSGI worker (:mod:`wurk.contrib.hosting`); the application
serves and enqueues all the same.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, MutableMapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

from wurk.config.configuration import Config
from wurk.config.defaults import current_config
from wurk.contrib.hosting import configure_from, start_embedded
from wurk.current import running

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

__all__ = ["WurkLifespan", "WurkMiddleware", "mount_dashboard", "wurk_lifespan"]

SOURCE = "Wurk settings"


class WurkLifespan:
    """A lifespan for ``FastAPI(lifespan=...)`` or ``Starlette(lifespan=...)``.

    The settings go into the configuration when this object is made, so that
    the application enqueues correctly even where no lifespan runs (a script
    importing it, a test client used without ``with``).
    """

    def __init__(
        self, options: Mapping[str, Any] | None = None, *, config: Config | None = None, embedded: bool = False
    ) -> None:
        # Outside any worker, the configuration at hand is the process default.
        self.config = config or current_config()
        self.options = configure_from(self.config, options or {}, SOURCE)
        self.embedded = embedded

    def __call__(self, app: object) -> AbstractAsyncContextManager[None]:
        return _running(self.config, self.options if self.embedded else None)


@asynccontextmanager
async def wurk_lifespan(
    app: object, options: Mapping[str, Any] | None = None, *, config: Config | None = None, embedded: bool = False
) -> AsyncIterator[Config]:
    """The same as :class:`WurkLifespan`, for ``async with`` inside a lifespan
    of your own; yields the configuration."""
    config = config or current_config()
    applied = configure_from(config, options or {}, SOURCE)
    async with _running(config, applied if embedded else None):
        yield config


@asynccontextmanager
async def _running(config: Config, embedded: Mapping[str, Any] | None) -> AsyncIterator[None]:
    """Run an embedded worker on ``config`` for the block, if ``embedded`` (the
    settings) is given and the process may run one."""
    if embedded is None:
        yield
        return
    # Starting and stopping talk to Redis and wait on threads: off the loop.
    instance = await asyncio.to_thread(start_embedded, config, embedded)
    try:
        yield
    finally:
        if instance is not None:
            await asyncio.to_thread(instance.stop)


class WurkMiddleware:
    """Runs every request as ``config``, so a handler's push goes through it:
    ``app.add_middleware(WurkMiddleware, config=my_config)``."""

    def __init__(self, app: ASGIApp, config: Config) -> None:
        self.app = app
        self.config = config

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        # The mark is a context variable: the tasks and worker threads a
        # request starts (a sync endpoint's thread pool) copy it.
        with running(self.config):
            await self.app(scope, receive, send)


def mount_dashboard(
    app: Any,
    dashboard: ASGIApp,
    *,
    prefix: str = "/wurk",
    protect: Callable[[Any], object] | None = None,
) -> None:
    """Mount the dashboard (``wurk_web.create_app(config)``) at ``prefix`` of a
    Starlette or FastAPI ``app``.

    ``protect(request)`` (a Starlette request; it may be async) is asked
    before every dashboard request; a falsey answer is a 403. Without it the
    dashboard is open to whoever reaches the prefix.
    """
    if protect is not None:
        dashboard = _protected(dashboard, protect)
    app.mount(prefix, dashboard)


def _protected(dashboard: ASGIApp, protect: Callable[[Any], object]) -> ASGIApp:
    from starlette.requests import Request
    from starlette.responses import PlainTextResponse

    async def guarded(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            allowed = protect(Request(scope, receive))
            if inspect.isawaitable(allowed):
                allowed = await allowed
            if not allowed:
                if scope["type"] == "http":
                    await PlainTextResponse("Forbidden", status_code=403)(scope, receive, send)
                else:
                    await send({"type": "websocket.close", "code": 1008})
                return
        await dashboard(scope, receive, send)

    return guarded
