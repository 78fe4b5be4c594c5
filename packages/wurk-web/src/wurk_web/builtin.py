"""The dashboard's own pages and JSON routes, registered like a plugin's.

Each page is a shell that names its view (``data-view``); the script that
ships with the dashboard (``static/app.js``) fills it from the JSON route of
the same area, so every page has its API by construction, and every value
reaches the page as text, never as markup.
"""

from __future__ import annotations

from pathlib import Path

from wurk.plugins.web import script_view
from wurk_web.registry import Dashboard
from wurk_web.views import insight, overview, profiles, queues, sets

STATIC = Path(__file__).parent / "static"

#: (path, title, view name, shown in the navigation bar), in navigation order.
PAGES = [
    ("/", "Dashboard", "dashboard", True),
    ("/busy", "Busy", "busy", True),
    ("/queues", "Queues", "queues", True),
    ("/queues/{name}", "Queue", "queue", False),
    ("/retries", "Retries", "retries", True),
    ("/scheduled", "Scheduled", "scheduled", True),
    ("/dead", "Dead", "dead", True),
    ("/retries/entry", "Retry", "entry", False),
    ("/scheduled/entry", "Scheduled job", "entry", False),
    ("/dead/entry", "Dead job", "entry", False),
    ("/metrics", "Metrics", "metrics", True),
    ("/metrics/{klass}", "Job metrics", "job-metrics", False),
    ("/search", "Search", "search", True),
]

POST = ("POST",)


def register(app: Dashboard) -> None:
    """Every page and route of the dashboard itself."""
    for path, title, name, nav in PAGES:
        app.add_page(path, title, script_view(name), nav=nav)
    app.add_api("/api/stats", overview.stats_snapshot)
    app.add_api("/api/stats/history", overview.stats_history)
    app.add_api("/api/stats/gauges", overview.stats_gauges)
    app.add_api("/api/processes", overview.processes)
    app.add_api("/api/processes/quiet", overview.quiet_process, POST)
    app.add_api("/api/processes/stop", overview.stop_process, POST)
    app.add_api("/api/queues", queues.list_queues)
    app.add_api("/api/queues/{name}", queues.queue_jobs)
    app.add_api("/api/queues/{name}/pause", queues.pause_queue, POST)
    app.add_api("/api/queues/{name}/unpause", queues.unpause_queue, POST)
    app.add_api("/api/queues/{name}/clear", queues.clear_queue, POST)
    app.add_api("/api/queues/{name}/delete", queues.delete_jobs, POST)
    app.add_api("/api/sets/{kind}", sets.list_entries)
    app.add_api("/api/sets/{kind}/entry", sets.entry_detail)
    app.add_api("/api/sets/{kind}/{action}", sets.act_on_entries, POST)
    app.add_api("/api/sets/{kind}/{action}/all", sets.act_on_set, POST)
    app.add_api("/api/metrics", insight.metrics)
    app.add_api("/api/metrics/{klass}", insight.job_metrics)
    app.add_api("/api/search", insight.search)
    profiles.register(app)
