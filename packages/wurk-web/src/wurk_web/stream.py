"""Live numbers as server-sent events: ``GET /api/stream``.

Every ``poll_seconds`` the stream sends one ``stats`` event, the same JSON as
``GET /api/stats``, read on the dashboard's pool in the thread pool. It ends
when the browser goes away, or after ``events`` events when a client asks for
a bounded stream (``?events=1``: one snapshot, then the end).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import StreamingResponse

from wurk_web import outage
from wurk_web.views.overview import stats_snapshot

if TYPE_CHECKING:
    from wurk_web.app import Settings


def frame(event: str, data: Any) -> str:
    """One server-sent event (the data is one line of JSON)."""
    return f"event: {event}\ndata: {json.dumps(data)}\n\n"


def endpoint(settings: Settings) -> Callable[[Request], Any]:
    async def stream(request: Request) -> StreamingResponse:
        wrapped = await settings.wrap(request)
        raw = request.query_params.get("events", "")
        limit = int(raw) if raw.isdigit() else 0  # 0: until the browser goes away

        async def events() -> AsyncIterator[str]:
            sent = 0
            # Ask the browser to come back after one poll if the stream drops.
            yield f"retry: {int(settings.poll_seconds * 1000)}\n\n"
            while not limit or sent < limit:
                try:
                    snapshot = await run_in_threadpool(stats_snapshot, wrapped)
                except outage.FAILURES as exc:
                    message = outage.report(settings.config, exc, shard=wrapped.shard)
                    yield frame("error", {"error": message})
                else:
                    outage.recovered(settings.config)
                    yield frame("stats", snapshot)
                sent += 1
                if limit and sent >= limit:
                    return
                if await request.is_disconnected():
                    return
                await asyncio.sleep(settings.poll_seconds)

        headers = {"cache-control": "no-store", "x-accel-buffering": "no"}
        return StreamingResponse(events(), media_type="text/event-stream", headers=headers)

    return stream
