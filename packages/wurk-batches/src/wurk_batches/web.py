"""``BatchStatusMiddleware``: batch progress as JSON, for progress bars.

Wraps a WSGI or an ASGI application (it tells them apart by how it is
called) and answers ``GET /batch_status/<bid>.json`` with ``Status.data()``;
an unknown or expired bid is a 404, and every other request goes straight to
the application::

    app = BatchStatusMiddleware(app)            # Flask's app.wsgi_app, Django's WSGI or ASGI app…

This is the guides' ``Sidekiq::Pro::BatchStatus`` Rack middleware.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable, Iterable
from typing import Any

import wurk
from wurk_batches.status import Status

PATH = re.compile(r"^/batch_status/(?P<bid>[A-Za-z0-9_\-]+)\.json$")


class BatchStatusMiddleware:
    def __init__(self, app: Any, *, config: wurk.Config | None = None) -> None:
        self.app = app
        self.config = config

    def answer(self, method: str, path: str) -> tuple[int, bytes] | None:
        """The status code and JSON body for a request, or None to pass it on."""
        match = PATH.match(path)
        if method not in ("GET", "HEAD") or match is None:
            return None
        status = Status(match["bid"], config=self.config or wurk.current_config())
        if not status.exists:
            return 404, b'{"error":"no such batch"}'
        return 200, json.dumps(status.data()).encode()

    def __call__(self, *args: Any) -> Any:
        if len(args) == 2:
            return self._wsgi(*args)
        return self._asgi(*args)

    def _wsgi(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        answered = self.answer(environ.get("REQUEST_METHOD", "GET"), environ.get("PATH_INFO", ""))
        if answered is None:
            result: Iterable[bytes] = self.app(environ, start_response)
            return result
        code, body = answered
        reason = "200 OK" if code == 200 else "404 Not Found"
        start_response(reason, [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
        return [body]

    async def _asgi(self, scope: dict[str, Any], receive: Callable[..., Any], send: Callable[..., Any]) -> None:
        if scope.get("type") != "http":
            await self.app(scope, receive, send)
            return
        # Reading Redis blocks: off the event loop.
        answered = await asyncio.to_thread(self.answer, scope.get("method", "GET"), scope.get("path", ""))
        if answered is None:
            await self.app(scope, receive, send)
            return
        code, body = answered
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": code, "headers": headers})
        await send({"type": "http.response.body", "body": body})


#: The guides' name for it.
BatchStatus = BatchStatusMiddleware
