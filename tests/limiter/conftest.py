"""Limiter tests: each on the suite's real server, with the process default
configuration pointed at it (the ``config`` fixture)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from wurk_limiter import Limiter

#: One limiter of every Redis-backed type, built by name, exhausted after
#: ``CAPACITY`` admissions (for ``window`` and ``bucket``, within their period).
CAPACITY = 2

MAKERS: dict[str, Callable[..., Limiter]] = {
    "concurrent": lambda name, **kw: Limiter.concurrent(name, CAPACITY, **kw),
    "bucket": lambda name, **kw: Limiter.bucket(name, CAPACITY, "hour", **kw),
    "window": lambda name, **kw: Limiter.window(name, CAPACITY, 3600, **kw),
    "leaky": lambda name, **kw: Limiter.leaky(name, CAPACITY, "day", **kw),
    "points": lambda name, **kw: Limiter.points(
        name, CAPACITY, 0.0001, **{k: v for k, v in kw.items() if k != "wait_timeout"}
    ),
}

#: The state key each type writes on an admission, and its Redis type.
STATE_KEY = {
    "concurrent": ("lmtr-cs:{name}", b"zset"),
    "bucket": (None, b"string"),
    "window": ("lmtr-w:{name}", b"zset"),
    "leaky": ("lmtr-l:{name}", b"hash"),
    "points": ("lmtr-p:{name}", b"hash"),
}


@pytest.fixture(params=sorted(MAKERS))
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def call_kwargs(kind: str) -> dict[str, float]:
    """The within_limit keywords a call of this type needs."""
    return {"estimate": 1} if kind == "points" else {}
