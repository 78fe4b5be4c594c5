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

    @property
    def pool(self) -> RedisPool:
        """The dashboard's Redis pool: pass it to the data API as ``pool=``."""
        return redis_pool(self.config)

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
