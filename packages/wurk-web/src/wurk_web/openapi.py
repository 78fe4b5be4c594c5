"""The OpenAPI document of every JSON route: ``GET /api/openapi.json``.

It is built from the registry at start-up, so a plugin's routes are listed
next to the dashboard's own; each operation's summary is the first line of
its handler's docstring, and each ``{name}`` in a path is a path parameter.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse

from wurk_web.registry import Api, Dashboard

PARAMETER = re.compile(r"{(\w+)}")
ERROR = {"description": 'An error: {"error": message}', "content": {"application/json": {}}}


def operation(api: Api, method: str) -> dict[str, Any]:
    doc = (api.handler.__doc__ or "").strip().splitlines()
    found: dict[str, Any] = {
        "operationId": f"{method.lower()}_{re.sub(r'[^a-z0-9]+', '_', api.path.lower()).strip('_')}",
        "summary": doc[0] if doc else api.path,
        "parameters": [
            {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}
            for name in PARAMETER.findall(api.path)
        ],
        "responses": {
            "200": {"description": "JSON", "content": {"application/json": {}}},
            "400": ERROR,
            "403": ERROR,
            "404": ERROR,
        },
    }
    if method != "GET":
        found["requestBody"] = {"required": False, "content": {"application/json": {"schema": {"type": "object"}}}}
    return found


def document(dashboard: Dashboard, version: str) -> dict[str, Any]:
    paths: dict[str, dict[str, Any]] = {
        "/api/stream": {
            "get": {
                "operationId": "get_api_stream",
                "summary": "Live numbers: a `stats` server-sent event (the body of /api/stats) every poll",
                "parameters": [{"name": "events", "in": "query", "schema": {"type": "integer"}}],
                "responses": {"200": {"description": "Server-sent events", "content": {"text/event-stream": {}}}},
            }
        }
    }
    for api in dashboard.apis:
        for method in api.methods:
            paths.setdefault(api.path, {})[method.lower()] = operation(api, method)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Wurk dashboard API",
            "version": version,
            "description": "The JSON behind every dashboard page. Changes are POSTs with a JSON body, "
            "refused in read-only mode and from other sites.",
        },
        "paths": dict(sorted(paths.items())),
    }


def endpoint(dashboard: Dashboard, version: str) -> Callable[[Request], Any]:
    cached = document(dashboard, version)

    async def serve(request: Request) -> JSONResponse:
        return JSONResponse(cached)

    return serve
