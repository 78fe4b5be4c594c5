"""The dashboard of several shards: ``/shard/<name>/`` is the whole dashboard
again, on that shard (docs/shards.md).

The shard is a path prefix rather than a query parameter or a cookie: the
pages link to each other and call the JSON routes by relative URLs, resolved
against ``<base href>``, which is the mount point with the prefix. So every
link, every call and every action of a page, a plugin's included, stays on
the shard the page shows, without a line of them knowing shards exist; and
two tabs on two shards cannot act on each other's (a cookie would make a
click in one tab act on the shard chosen last in the other).

:class:`ShardRouter` sits inside the :class:`~wurk_web.security.Guard`, so
the host, authorization, read-only and cross-site rules apply to shard paths
exactly as to the others, and the authorization hook sees the prefix in the
path it is given (``/shard/east/api/queues``), to allow shards by user.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING
from urllib.parse import quote

from wurk_web.security import ASGIApp, Receive, Scope, Send, relative_path

if TYPE_CHECKING:
    from wurk.config.configuration import Config

#: The path prefix that selects a shard.
PREFIX = "/shard/"
#: The key of the ASGI scope that names the shard a request is for.
SCOPE_KEY = "wurk.shard"


def mount_root(root: str, shard: str | None) -> str:
    """The dashboard's mount point: ``root`` without the shard's prefix."""
    suffix = f"{PREFIX.rstrip('/')}/{shard}" if shard else ""
    return root[: -len(suffix)] if suffix and root.endswith(suffix) else root


class ShardRouter:
    """Strips ``/shard/<name>`` from the path into the ``root_path`` and
    names the shard in the scope; an unknown shard is a 404."""

    def __init__(self, app: ASGIApp, config: Config) -> None:
        self.app = app
        self.config = config

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = relative_path(scope) if scope["type"] == "http" else ""
        if not path.startswith(PREFIX):
            await self.app(scope, receive, send)
            return
        name, slash, _rest = path[len(PREFIX) :].partition("/")
        known = self.config.shards
        if name not in known:
            names = ", ".join(sorted(known)) or "none"
            await _answer(send, 404, f"no shard {name!r} (configured shards: {names})")
            return
        root = str(scope.get("root_path", "")) + PREFIX + name
        if not slash:  # /shard/east: the pages' relative links need the trailing slash
            await _redirect(send, root + "/")
            return
        await self.app({**scope, "root_path": root, SCOPE_KEY: name}, receive, send)


async def _answer(send: Send, status: int, reason: str) -> None:
    body = json.dumps({"error": reason}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})  # the Guard adds its own
    await send({"type": "http.response.body", "body": body})


async def _redirect(send: Send, location: str) -> None:
    headers = [(b"location", quote(location).encode()), (b"content-length", b"0")]
    await send({"type": "http.response.start", "status": 307, "headers": headers})
    await send({"type": "http.response.body", "body": b""})
