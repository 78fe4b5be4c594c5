"""The application the context-propagation tests run in real ``wurk`` workers.

Its jobs write down what the carried context variables held while they ran,
and whether their payload carried the fields at all, as JSON lines in the
list ``seen``.
"""

from __future__ import annotations

import json
from contextvars import ContextVar

import redis

import wurk
from tests.evidence import evidence_url
from wurk.current import current_job

tenant: ContextVar[str] = ContextVar("tenant")
request_id: ContextVar[str] = ContextVar("request_id")
locale: ContextVar[str] = ContextVar("app_locale", default="en")


@wurk.configure_server
def carry(config):
    wurk.propagate(tenant, config=config)
    wurk.propagate(request_id, config=config)
    wurk.propagate(locale, key="locale", config=config)


def note(label: str) -> None:
    payload = current_job.get() or {}
    seen = {
        "label": label,
        "tenant": tenant.get("<unset>"),
        "request_id": request_id.get("<unset>"),
        "locale": locale.get(),
        "fields": sorted(key for key in ("tenant", "request_id", "locale") if key in payload),
    }
    redis.Redis.from_url(evidence_url()).rpush("seen", json.dumps(seen))


class Remember(wurk.Job):
    """Notes what it sees; with ``nest``, pushes a job of its own first,
    and then changes the variables itself, as a careless job may."""

    def perform(self, label, nest=False):
        if nest:
            Remember.perform_async(f"{label}/child")
        note(label)
        tenant.set("changed-by-the-job")


class RememberAsync(wurk.Job):
    async def perform(self, label):
        note(label)
