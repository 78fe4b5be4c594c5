"""The wurk-audit plugin: who enqueued each job, and how every run ended.

Every part of Wurk's plugin surface in one small package (docs/plugins.md
walks through it):

* a job option it owns (``audit``: set it to False to leave a job out) and a
  setting (``audit_keep``: how many recent outcomes to keep);
* a client middleware that stamps each job with the host that pushed it;
* an outcome listener that counts every run's ending in one Lua script;
* a component that, on the cluster leader only, writes a summary every
  ``audit_summary_interval`` seconds, fenced so a stale leader's write is
  refused;
* a dashboard page and a JSON route, and a ``wurk audit`` command.
"""

from __future__ import annotations

import html
import json
import socket
import time
from typing import Any

import click

import wurk
from wurk.server.leader import fenced_set

#: The plugin API this package is built for: Wurk refuses to load it into a
#: core that provides another major, or an older minor.
WURK_PLUGIN_API = (1, 2)

OWNER = "wurk-audit"
COUNTS = "audit:counts"
RECENT = "audit:recent"
SUMMARY = "audit:summary"


# -- options and settings ----------------------------------------------------


@wurk.hookimpl
def wurk_register_options(options):
    options.add("audit", owner=OWNER)


def _positive_whole(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise wurk.ConfigurationError(f"{name} must be a whole number >= 1, got {value!r}")


def _positive_seconds(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise wurk.ConfigurationError(f"{name} must be a number of seconds > 0, got {value!r}")


@wurk.hookimpl
def wurk_register_settings(settings):
    settings.add("audit_keep", default=100, check=_positive_whole, owner=OWNER, doc="recent outcomes kept")
    settings.add(
        "audit_summary_interval", default=60.0, check=_positive_seconds, owner=OWNER, doc="seconds between summaries"
    )


# -- middleware ------------------------------------------------------------------


class StampEnqueuer(wurk.ClientMiddleware):
    """Record which host enqueued a job, unless the job opted out."""

    def call(self, job_class, job, queue, redis_pool, call_next):
        if job.get("audit", True):
            job.setdefault("enqueued_by", socket.gethostname())
        return call_next()


@wurk.hookimpl
def wurk_register_middleware(client, server, config):
    client.add(StampEnqueuer)


# -- a Lua script and an outcome listener -------------------------------------------


@wurk.hookimpl
def wurk_register_scripts(scripts):
    scripts.register_package("wurk_audit", namespace="audit")


@wurk.hookimpl
def wurk_job_outcome(outcome, config):
    job = outcome.job
    if not job.get("audit", True):
        return
    entry = json.dumps(
        {
            "jid": outcome.jid,
            "class": job.get("class"),
            "kind": outcome.kind,
            "reason": outcome.reason,
            "enqueued_by": job.get("enqueued_by"),
        }
    )
    config.redis_pool.execute(
        lambda conn: config.scripts.call(
            "audit.record", conn, [COUNTS, RECENT], [outcome.kind, entry, config["audit_keep"]]
        )
    )


# -- a component -----------------------------------------------------------------------


class Summary(wurk.Component):
    """Writes the totals to ``audit:summary`` while this process leads."""

    name = "audit-summary"

    def __init__(self, runtime):
        super().__init__(runtime.config)
        self.runtime = runtime
        self.interval = float(self.config["audit_summary_interval"])

    def tick(self):
        leading = self.runtime.leader.leadership()
        if not leading or leading.token is None:
            return
        counts = self.config.redis_pool.client.hgetall(COUNTS)
        summary = {key.decode(): int(value) for key, value in counts.items()}
        summary["at"] = int(time.time())
        summary["by"] = self.runtime.identity.identity
        fenced_set(self.config, SUMMARY, json.dumps(summary, sort_keys=True), leading.token)


@wurk.hookimpl
def wurk_register_components(components, runtime):
    components.add(Summary(runtime))


# -- the dashboard and the command line ------------------------------------------------------


def counts(config) -> dict[str, int]:
    raw = config.redis_pool.client.hgetall(COUNTS)
    return {key.decode(): int(value) for key, value in sorted(raw.items())}


def render_page(config) -> str:
    rows = "".join(f"<tr><td>{html.escape(kind)}</td><td>{count}</td></tr>" for kind, count in counts(config).items())
    return f"<h2>Job outcomes</h2><table><tr><th>outcome</th><th>runs</th></tr>{rows}</table>"


@wurk.hookimpl
def wurk_register_web(app):
    app.add_page("/audit", "Audit", render_page)
    app.add_api("/api/audit", counts)


@click.command("audit")
def audit_command():
    """Print how many job runs ended each way."""
    for kind, count in counts(wurk.default_config()).items():
        click.echo(f"{kind}: {count}")


@wurk.hookimpl
def wurk_register_commands(cli):
    cli.add_command(audit_command)
