"""Fixtures of the dashboard tests: a live dashboard on the test server's Redis,
and the payloads the pages show."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

import wurk
import wurk_web

from .live import client_for


@pytest.fixture
def web(config: wurk.Config) -> Iterator[httpx.Client]:
    """A client of a dashboard served over HTTP for ``config``."""
    with client_for(wurk_web.create_app(config, poll_seconds=0.05)) as client:
        yield client


def failed_job(jid: str, *, klass: str = "app.jobs.Charge", args: list[Any] | None = None, **extra: Any) -> dict:
    """A payload as the retry layer leaves it in ``retry`` or ``dead``."""
    return {
        "retry": True,
        "queue": "default",
        "class": klass,
        "args": args if args is not None else [jid],
        "jid": jid,
        "created_at": 1796027746766,
        "enqueued_at": 1796027746766,
        "error_message": "boom",
        "error_class": "RuntimeError",
        "failed_at": 1796027747092,
        "retry_count": 2,
        **extra,
    }


def jid_of(number: int) -> str:
    return f"{number:024x}"
