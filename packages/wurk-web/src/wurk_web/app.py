"""The dashboard as one ASGI application: :func:`create_app`.

Built on Starlette, for its routing, request parsing, static files and
streaming responses (the live numbers are server-sent events); every page
and route comes from a :class:`~wurk_web.registry.Dashboard` filled by the
dashboard itself and by each enabled plugin's ``wurk_register_web`` hook.
The data API is synchronous, so handlers run in Starlette's thread pool and
the event loop only ever waits.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Sequence
from typing import TYPE_CHECKING, Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, JSONResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

import wurk
from wurk.config import env
from wurk.plugins.web import WebError
from wurk_web import builtin, layout, openapi, outage, shards, stream
from wurk_web.registry import Api, Dashboard, Page
from wurk_web.request import DashboardRequest
from wurk_web.security import ASGIApp, Authorization, Guard, relative_path

if TYPE_CHECKING:
    from wurk.config.configuration import Config

#: Seconds between two live updates of the numbers (server-sent events).
POLL_SECONDS = 2.0


def read_only_mode(config: Config, explicit: bool | None) -> bool:
    """``explicit`` when given, else ``config["web_read_only"]`` when set, else ``WURK_WEB_READ_ONLY``."""
    if explicit is not None:
        return bool(explicit)
    configured = config.get("web_read_only")
    if configured is not None:
        return bool(configured)
    return env.truthy(env.get("WEB_READ_ONLY"))


class Settings:
    """What every handler of one application shares."""

    def __init__(self, config: Config, dashboard: Dashboard, read_only: bool, poll_seconds: float) -> None:
        self.config = config
        self.dashboard = dashboard
        self.read_only = read_only
        self.poll_seconds = poll_seconds

    async def wrap(self, request: Request, path_params: dict[str, str] | None = None) -> DashboardRequest:
        body: Any = None
        if request.method not in ("GET", "HEAD"):
            raw = await request.body()
            if raw:
                try:
                    body = json.loads(raw)
                except ValueError:
                    raise WebError(400, "the body is not JSON") from None
        return DashboardRequest(
            method=request.method,
            path=relative_path(request.scope),
            params=dict(request.query_params),
            path_params=dict(path_params if path_params is not None else request.path_params),
            body=body,
            config=self.config,
            read_only=self.read_only,
            root=str(request.scope.get("root_path", "")).rstrip("/"),
            raw=request,
            shard=request.scope.get(shards.SCOPE_KEY),
        )

    def run(self, handler: Callable[[DashboardRequest], Any], request: DashboardRequest) -> Any:
        """``handler(request)``, with the configuration's Redis routed to the
        request's shard (``wurk.via``): a plugin's page that reads
        ``config.redis_pool`` shows the same shard as the others."""
        if request.shard is None:
            return handler(request)
        with wurk.via(request.pool, self.config):
            return handler(request)


def api_endpoint(settings: Settings, api: Api) -> Callable[[Request], Any]:
    async def endpoint(request: Request) -> Response:
        try:
            wrapped = await settings.wrap(request)
            result = await run_in_threadpool(settings.run, api.handler, wrapped)
        except WebError as exc:
            return JSONResponse({"error": exc.message}, status_code=exc.status)
        except outage.FAILURES as exc:
            message = outage.report(settings.config, exc, shard=request.scope.get(shards.SCOPE_KEY))
            headers = {"retry-after": str(outage.RETRY_AFTER)}
            return JSONResponse({"error": message}, status_code=503, headers=headers)
        outage.recovered(settings.config)
        if isinstance(result, Response):  # a download (a profile's data), sent as the handler built it
            return result
        return JSONResponse(result, headers={"cache-control": "no-store"})

    return endpoint


def page_endpoint(settings: Settings, page: Page, version: str) -> Callable[[Request], Any]:
    async def endpoint(request: Request) -> Response:
        root = str(request.scope.get("root_path", "")).rstrip("/")
        shard = request.scope.get(shards.SCOPE_KEY)
        headers = {"cache-control": "no-store"}
        try:
            wrapped = await settings.wrap(request)
            await run_in_threadpool(outage.ping, settings.config, wrapped.pool)
            outage.recovered(settings.config)
            body = await run_in_threadpool(settings.run, page.render, wrapped)
        except WebError as exc:
            body, status = f"<p class='error'>{exc.status}</p>", exc.status
        except outage.FAILURES as exc:
            body, status = outage.page_body(outage.report(settings.config, exc, shard=shard)), 503
            headers["retry-after"] = str(outage.RETRY_AFTER)
        else:
            status = 200
        document = layout.render_page(
            page,
            body,
            nav=settings.dashboard.nav(),
            root=root,
            read_only=settings.read_only,
            version=version,
            poll_seconds=settings.poll_seconds,
            shards=layout.ShardChoice(
                names=sorted(settings.config.shards),
                current=shard,
                mount=shards.mount_root(root, shard),
                path=relative_path(request.scope),
            ),
        )
        return HTMLResponse(document, status_code=status, headers=headers)

    return endpoint


async def favicon(request: Request) -> Response:
    """The icon at ``favicon.ico``, where a browser asks when a page names none
    (a JSON route opened in a tab): the pages' own SVG, so no 404 is logged."""
    return FileResponse(layout.FAVICON, media_type="image/svg+xml", headers={"cache-control": "max-age=86400"})


def routes(settings: Settings, version: str) -> list[BaseRoute]:
    dashboard = settings.dashboard
    found: list[BaseRoute] = [
        Route("/favicon.ico", favicon, methods=["GET"]),
        Route("/api/openapi.json", openapi.endpoint(dashboard, version), methods=["GET"]),
        Route("/api/stream", stream.endpoint(settings), methods=["GET"]),
        Mount("/static/wurk", StaticFiles(directory=builtin.STATIC), name="wurk-static"),
    ]
    found += [Route(api.path, api_endpoint(settings, api), methods=list(api.methods)) for api in dashboard.apis]
    found += [Route(page.path, page_endpoint(settings, page, version), methods=["GET"]) for page in dashboard.pages]
    found += [Mount(static.prefix, StaticFiles(directory=static.directory)) for static in dashboard.statics]
    return found


def create_app(
    config: Config | None = None,
    *,
    read_only: bool | None = None,
    authorization: Authorization | None = None,
    middleware: Sequence[Callable[[ASGIApp], ASGIApp]] = (),
    trusted_origins: Collection[str] = (),
    allowed_hosts: Collection[str] = (),
    poll_seconds: float = POLL_SECONDS,
) -> ASGIApp:
    """The dashboard for ``config`` (the process default when None), as an ASGI app.

    ``read_only`` overrides ``config["web_read_only"]`` and ``WURK_WEB_READ_ONLY``;
    ``authorization(request, method, path)`` is asked before every request (a
    falsey answer is a 403; it may be async); each of ``middleware`` wraps the
    application (the first one outermost), for sessions or logins of your own;
    ``trusted_origins`` lists other origins (``"https://admin.example.com"``)
    allowed to send changes, for a dashboard behind a proxy that rewrites the host;
    ``allowed_hosts``, when given, lists the only host names (``"localhost"``,
    no port) a request's ``Host`` header may name, against DNS rebinding; the
    others are a 400 (your framework's own host check does this when mounted).
    """
    from wurk_web import __version__

    if config is None:
        from wurk.config.defaults import default_config

        config = default_config()
    dashboard = Dashboard()
    builtin.register(dashboard)
    config.plugins.call.register_web(dashboard)
    settings = Settings(config, dashboard, read_only_mode(config, read_only), poll_seconds)
    app: ASGIApp = shards.ShardRouter(Starlette(routes=routes(settings, __version__)), config)
    app = Guard(
        app,
        read_only=settings.read_only,
        authorization=authorization,
        trusted_origins=trusted_origins,
        allowed_hosts=allowed_hosts,
    )
    for wrapper in reversed(middleware):
        app = wrapper(app)
    return app
