"""The Metrics and Search pages."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from wurk.api import JobRecord, Search, SortedEntry, SortedSet
from wurk.metrics import BUCKET_LABELS, Query, Result
from wurk_web.present import entry_summary, job_summary
from wurk_web.request import DashboardRequest

#: Minutes a metrics window may span (the minutely buckets Redis keeps).
MAX_MINUTES = 480
#: Page names of the sorted sets, for links from a search result.
SET_PAGES = {"retry": "retries", "scheduled": "scheduled", "dead": "dead"}


def _window(request: DashboardRequest) -> dict[str, Any]:
    hours = request.int_param("hours", 0, 0, 72)
    if hours:
        return {"hours": hours}
    return {"minutes": request.int_param("minutes", 60, 1, MAX_MINUTES)}


def _window_fields(result: Result) -> dict[str, Any]:
    return {
        "granularity": result.granularity,
        "starts_at": result.starts_at.timestamp(),
        "ends_at": result.ends_at.timestamp(),
        "marks": [{"at": mark.time.timestamp(), "label": mark.label} for mark in result.marks],
    }


def metrics(request: DashboardRequest) -> dict[str, Any]:
    """Per-class totals over a window (``minutes``, or ``hours``), busiest first; ``filter`` is a substring."""
    needle = request.params.get("filter", "").strip().lower()
    result = Query(request.config, pool=request.pool).top_jobs(**_window(request))
    classes: list[dict[str, Any]] = []
    for klass, job in result.job_results.items():
        if needle and needle not in klass.lower():
            continue
        processed, failed = job.totals["p"], job.totals["f"]
        classes.append(
            {
                "class": klass,
                "processed": int(processed),
                "failed": int(failed),
                "seconds": job.totals["s"],
                "avg_ms": job.total_avg("ms"),
            }
        )
    classes.sort(key=lambda row: (-row["processed"], row["class"]))
    return {**_window_fields(result), "classes": classes}


def job_metrics(request: DashboardRequest) -> dict[str, Any]:
    """One class over a window: processed, failed and mean duration per bucket, and its duration histogram."""
    klass = request.path_params["klass"]
    result = Query(request.config, pool=request.pool).for_job(klass, **_window(request))
    job = result.job_results[klass]
    buckets = sorted(set(job.series["p"]) | set(job.series["ms"]) | set(job.hist))
    histogram = [0] * len(BUCKET_LABELS)
    for counts in job.hist.values():
        for index, count in enumerate(counts[: len(histogram)]):
            histogram[index] += count
    return {
        **_window_fields(result),
        "class": klass,
        "totals": {"processed": int(job.totals["p"]), "failed": int(job.totals["f"]), "avg_ms": job.total_avg("ms")},
        "series": [
            {
                "bucket": bucket,
                "processed": int(job.series["p"].get(bucket, 0)),
                "failed": int(job.series["f"].get(bucket, 0)),
                "avg_ms": job.series_avg("ms").get(bucket, 0.0),
            }
            for bucket in buckets
        ],
        "histogram": {"labels": list(BUCKET_LABELS), "counts": histogram},
    }


def search(request: DashboardRequest) -> dict[str, Any]:
    """Jobs containing ``q`` (any case) in the queues and sets (``kinds``, a comma list); bounded."""
    query = request.params.get("q", "").strip()
    kinds = [kind for kind in request.params.get("kinds", "").split(",") if kind in Search.KINDS]
    limit = request.int_param("limit", 100, 1, Search.MAX_LIMIT)
    found = Search(query, kinds=kinds or None, limit=limit, config=request.config, pool=request.pool)
    rows = []
    for row in found.results():
        if row.kind == "queues":
            summary = job_summary(JobRecord(row.value, row.name, config=request.config))
            rows.append({"kind": "queues", "name": row.name, "page": f"queues/{quote(row.name, safe='')}", **summary})
        else:
            holder = SortedSet(row.name, config=request.config, pool=request.pool)
            summary = entry_summary(SortedEntry(holder, row.score or 0.0, row.value))
            rows.append({"kind": row.kind, "name": row.name, "page": SET_PAGES[row.kind], **summary})
    return {"q": query, "results": rows, "truncated": found.truncated}
