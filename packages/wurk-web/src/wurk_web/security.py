"""The dashboard's gate: authorization, read-only mode, cross-site requests.

Every request, to a core page or a plugin's, passes :class:`Guard` before it
reaches a route, in this order:

0. with ``allowed_hosts``, the ``Host`` header must name one of them: a page
   on another site that re-points its own name at the dashboard's address
   (DNS rebinding) makes the browser treat the dashboard as that site, so
   the cross-site check below would see nothing wrong; the host it sends
   gives it away (``wurk web`` on a loopback address allows only loopback
   names);
1. the ``authorization(request, method, path)`` hook, when one is given: a
   falsey answer is a 403;
2. read-only mode: any method but GET and HEAD is a 403;
3. for a mutation, the cross-site check: a browser says where a request comes
   from (``Sec-Fetch-Site``, else ``Origin``), and anything but this origin
   (or one listed in ``trusted_origins``) is a 403. A request with neither
   header is not a browser's, so it cannot be a forged one;
4. a mutation's body must be JSON (``Content-Type: application/json``): a
   cross-site HTML form cannot send that type without a CORS preflight, which
   the dashboard never grants, so this holds even for a browser too old to
   send the headers above.

Every response carries a content security policy that allows scripts from
the dashboard itself only, so an argument that slipped into the page as
markup could still not run, and forbids framing (``frame-ancestors 'none'``,
and ``X-Frame-Options: DENY`` for browsers that predate it), so no other
page can overlay the dashboard's buttons to trick a click.
See docs/security.md for the whole threat model.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Awaitable, Callable, Collection, MutableMapping
from typing import Any

from starlette.requests import Request

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

#: ``authorization(request, method, path)``: truthy lets the request through.
Authorization = Callable[[Request, str, str], Any]

READS = frozenset({"GET", "HEAD", "OPTIONS"})

SECURITY_HEADERS = [
    (
        b"content-security-policy",
        b"default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        b"connect-src 'self'; frame-ancestors 'none'; base-uri 'self'; form-action 'self'",
    ),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),
]


def relative_path(scope: Scope) -> str:
    """The path below the dashboard's mount point (``/api/queues``)."""
    path = str(scope.get("path", "/"))
    root = str(scope.get("root_path", ""))
    if root and path.startswith(root):
        path = path[len(root) :]
    return path or "/"


def host_name(request: Request) -> str:
    """The ``Host`` header's name, lowercased, without its port (``[::1]:80`` is ``::1``)."""
    host = request.headers.get("host", "").strip().lower()
    if host.startswith("["):
        return host[1:].partition("]")[0]
    return host.rpartition(":")[0] if host.count(":") == 1 else host


def own_origin(request: Request) -> str:
    url = request.url
    return f"{url.scheme}://{url.netloc}"


def cross_site_reason(request: Request, trusted_origins: Collection[str]) -> str | None:
    """Why a mutation looks forged by another site, or None when it does not."""
    origin = request.headers.get("origin")
    if origin is not None and origin in trusted_origins:
        return None
    site = request.headers.get("sec-fetch-site")
    if site is not None:
        return None if site == "same-origin" else f"a {site} request"
    if origin is not None and origin != own_origin(request):
        return f"a request from {origin}"
    return None


class Guard:
    """ASGI middleware applying the rules of the module docstring."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        read_only: bool,
        authorization: Authorization | None,
        trusted_origins: Collection[str] = (),
        allowed_hosts: Collection[str] = (),
    ) -> None:
        self.app = app
        self.read_only = read_only
        self.authorization = authorization
        self.trusted_origins = frozenset(trusted_origins)
        self.allowed_hosts = frozenset(host.lower() for host in allowed_hosts)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        refusal = await self.refusal(Request(scope, receive))
        if refusal is not None:
            await _answer(send, *refusal)
            return

        async def send_secured(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *SECURITY_HEADERS]
            await send(message)

        await self.app(scope, receive, send_secured)

    async def refusal(self, request: Request) -> tuple[int, str] | None:
        """``(status, reason)`` when the request must not go through."""
        method = request.method.upper()
        path = relative_path(request.scope)
        if self.allowed_hosts and host_name(request) not in self.allowed_hosts:
            return 400, f"this dashboard does not serve the host {host_name(request)!r}"
        if self.authorization is not None:
            allowed = self.authorization(request, method, path)
            if inspect.isawaitable(allowed):
                allowed = await allowed
            if not allowed:
                return 403, "not authorized"
        if method in READS:
            return None
        if self.read_only:
            return 403, "the dashboard is read-only"
        reason = cross_site_reason(request, self.trusted_origins)
        if reason is not None:
            return 403, f"cross-site request refused ({reason})"
        content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if content_type != "application/json":
            return 415, "a change is sent as JSON (Content-Type: application/json)"
        return None


async def _answer(send: Send, status: int, reason: str) -> None:
    body = json.dumps({"error": reason}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": [*headers, *SECURITY_HEADERS]})
    await send({"type": "http.response.body", "body": body})
