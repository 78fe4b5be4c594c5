"""The Queues pages: sizes, latency, pause state, and each queue's jobs.

A queue is a list that workers take from one end while clients push on the
other, so its pages are plain offsets from the newest job: a job pushed
meanwhile shifts the page by one, as it does in every Sidekiq dashboard. The
sorted sets, which do not move that way, get stable cursors (see
:mod:`wurk_web.views.sets`).
"""

from __future__ import annotations

from typing import Any

from wurk.api import JobRecord, Queue, Stats
from wurk.plugins.web import WebError
from wurk.redis import keys
from wurk_web.present import counted, job_summary
from wurk_web.request import DashboardRequest

PAGE_LIMIT = 25
MAX_LIMIT = 200


def _queue(request: DashboardRequest) -> Queue:
    name = request.path_params["name"]
    if not name or len(name) > 512:
        raise WebError(400, "a queue name is 1 to 512 characters")
    return Queue(name, config=request.config, pool=request.pool)


def list_queues(request: DashboardRequest) -> dict[str, Any]:
    """Every queue with its size, latency (seconds) and paused flag, largest first."""
    summaries = Stats(config=request.config, pool=request.pool).queue_summaries
    return {
        "queues": [
            {"name": row.name, "size": row.size, "latency": row.latency, "paused": row.paused} for row in summaries
        ]
    }


def queue_jobs(request: DashboardRequest) -> dict[str, Any]:
    """One queue's jobs, newest first: ``limit`` from the offset ``cursor``."""
    queue = _queue(request)
    limit = request.int_param("limit", PAGE_LIMIT, 1, MAX_LIMIT)
    start = request.int_param("cursor", 0, 0, 2**62)
    key = keys.queue(queue.name)
    values = queue.run(lambda conn: conn.lrange(key, start, start + limit - 1))
    size = queue.size
    jobs = [
        {"index": start + offset, **job_summary(JobRecord(value, queue.name, config=request.config))}
        for offset, value in enumerate(values)
    ]
    following = start + len(values)
    return {
        "name": queue.name,
        "size": size,
        "latency": queue.latency,
        "paused": queue.paused,
        "jobs": jobs,
        "cursor": str(following) if following < size else None,
    }


def pause_queue(request: DashboardRequest) -> dict[str, Any]:
    """Stop workers fetching from the queue (``Queue.pause``)."""
    queue = _queue(request)
    queue.pause()
    return {"name": queue.name, "paused": True, "message": f"Paused {queue.name}: workers take nothing from it."}


def unpause_queue(request: DashboardRequest) -> dict[str, Any]:
    """Let workers fetch from the queue again (``Queue.unpause``)."""
    queue = _queue(request)
    queue.unpause()
    return {"name": queue.name, "paused": False, "message": f"Unpaused {queue.name}."}


def clear_queue(request: DashboardRequest) -> dict[str, Any]:
    """Drop every job of the queue and forget it (``Queue.clear``)."""
    queue = _queue(request)
    size = queue.size
    queue.clear()
    return {"name": queue.name, "cleared": size, "message": f"Cleared {queue.name}: deleted {counted(size, 'job')}."}


def delete_jobs(request: DashboardRequest) -> dict[str, Any]:
    """Remove the jobs ``{"jids": [...]}`` from the queue (``Queue.delete_job``)."""
    queue = _queue(request)
    jids = request.body_list("jids")
    deleted = sum(queue.delete_job(jid) for jid in jids)
    message = f"Deleted {counted(deleted, 'job')} from {queue.name}"
    gone = len(jids) - deleted
    if gone > 0:
        message += f"; {gone} {'was' if gone == 1 else 'were'} gone already"
    return {"name": queue.name, "deleted": deleted, "message": message + "."}
