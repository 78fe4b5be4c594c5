"""The request object handed to every page and JSON route (:class:`wurk.plugins.web.WebRequest`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from wurk.plugins.web import WebError
from wurk_web.pool import redis_pool

if TYPE_CHECKING:
    from wurk.config.configuration import Config
    from wurk.redis.connection import RedisPool


@dataclass
class DashboardRequest:
    method: str
    path: str
    params: Mapping[str, str]
    path_params: Mapping[str, str]
    body: Any
    config: Config
    read_only: bool
    root: str
    #: The framework's own request, for a handler that needs headers or cookies.
    raw: Any = field(default=None, repr=False)
    #: The shard the request is for (``/shard/<name>/…``), None for the main Redis.
    shard: str | None = None

    @property
    def pool(self) -> RedisPool:
        """The Redis pool of the shard the request is for (the dashboard's own
        pool on the main Redis): pass it to the data API as ``pool=``. While a
        handler runs, ``config.redis_pool`` is the same server (``wurk.via``),
        so a page reading that instead shows the same shard."""
        if self.shard is None:
            return redis_pool(self.config)
        return self.config.shard(self.shard)

    def int_param(self, name: str, default: int, low: int, high: int) -> int:
        """A whole-number query parameter clamped into ``low..high``; 400 when not a number."""
        raw = self.params.get(name)
        if raw is None or raw == "":
            return default
        try:
            return max(low, min(int(raw), high))
        except ValueError:
            raise WebError(400, f"{name} must be a whole number, got {raw!r}") from None

    def body_list(self, name: str) -> list[str]:
        """A list of strings from the JSON body (``{"ids": [...]}``); 400 otherwise."""
        values = self.body.get(name) if isinstance(self.body, dict) else None
        if not isinstance(values, list) or not values or not all(isinstance(value, str) for value in values):
            raise WebError(400, f"the body needs {name!r}: a non-empty list of strings")
        return values
