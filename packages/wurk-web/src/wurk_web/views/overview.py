"""The Dashboard and Busy pages: counters, history, processes and running jobs."""

from __future__ import annotations

import time
from typing import Any

from wurk.api import History, ProcessSet, Stats, WorkSet
from wurk.errors import EmbeddedProcessError
from wurk.metrics import Query
from wurk.plugins.web import WebError
from wurk_web.present import job_summary
from wurk_web.request import DashboardRequest


def stats_snapshot(request: DashboardRequest) -> dict[str, Any]:
    """The headline numbers: processed, failed, busy, enqueued, latency and set sizes."""
    stats = Stats(config=request.config, pool=request.pool)
    return {
        "processed": stats.processed,
        "failed": stats.failed,
        "busy": stats.workers_size,
        "enqueued": stats.enqueued,
        "latency": stats.default_queue_latency,
        "scheduled": stats.scheduled_size,
        "retries": stats.retry_size,
        "dead": stats.dead_size,
        "processes": stats.processes_size,
        "time": time.time(),
    }


def stats_history(request: DashboardRequest) -> dict[str, Any]:
    """Processed and failed per day (UTC), newest first, over ``days`` (1..180, default 30)."""
    days = request.int_param("days", 30, 1, 180)
    history = History(days, config=request.config, pool=request.pool)
    return {"processed": history.processed, "failed": history.failed}


def stats_gauges(request: DashboardRequest) -> dict[str, Any]:
    """The leader's recent samples (enqueued, busy, set sizes per sample), oldest first."""
    count = request.int_param("count", 60, 1, 720)
    samples = Query(request.config, pool=request.pool).gauges(count)
    return {
        "samples": [
            {
                "at": sample.at.timestamp(),
                "processed": sample.processed,
                "failed": sample.failed,
                "enqueued": sample.enqueued,
                "busy": sample.busy,
                "retry": sample.retry,
                "scheduled": sample.scheduled,
                "dead": sample.dead,
            }
            for sample in samples
        ]
    }


def processes(request: DashboardRequest) -> dict[str, Any]:
    """Every live process, and every running job with when it started."""
    process_set = ProcessSet(config=request.config, pool=request.pool)
    leader = process_set.leader
    found = [
        {
            "identity": process.identity,
            "hostname": process.get("hostname"),
            "pid": process.get("pid"),
            "tag": process.tag,
            "labels": process.labels,
            "version": process.version,
            "started_at": process.get("started_at"),
            "queues": process.queues,
            "concurrency": process.concurrency,
            "busy": process.busy,
            "rss_kb": process.rss,
            "beat": process.beat,
            "stopping": process.stopping,
            "embedded": process.embedded,
            "leader": process.identity == leader,
        }
        for process in process_set
    ]
    works = [
        {"process": work.process_id, "thread": work.thread_id, "run_at": work.run_at_epoch, **job_summary(work.job)}
        for work in WorkSet(config=request.config, pool=request.pool)
    ]
    return {"processes": found, "jobs": works, "time": time.time()}


def _signal(request: DashboardRequest, action: str) -> dict[str, Any]:
    identity = request.body.get("identity") if isinstance(request.body, dict) else None
    if not isinstance(identity, str) or not identity:
        raise WebError(400, "the body needs the process's 'identity'")
    process = ProcessSet(clean=False, config=request.config, pool=request.pool).get(identity)
    if process is None:
        raise WebError(404, f"no live process {identity}")
    try:
        process.quiet() if action == "quiet" else process.stop()
    except EmbeddedProcessError as exc:
        raise WebError(409, str(exc)) from None
    told = "to stop fetching jobs" if action == "quiet" else "to shut down"
    message = f"Asked {identity} {told}; it acts on its next heartbeat."
    return {"identity": identity, "signal": action, "message": message}


def quiet_process(request: DashboardRequest) -> dict[str, Any]:
    """Ask a process to stop fetching jobs (``{"identity": ...}``)."""
    return _signal(request, "quiet")


def stop_process(request: DashboardRequest) -> dict[str, Any]:
    """Ask a process to shut down (``{"identity": ...}``)."""
    return _signal(request, "stop")
