"""The dashboard's own Redis pool.

The dashboard keeps a pool apart from the worker's, so that a page full of
queries never starves a processor of connections. Every read and action the
dashboard makes goes through the data API with this pool: reaching it is this
one function, so where the pool comes from can change in one place.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from wurk.config import Config
    from wurk.redis_pool import RedisPool


def redis_pool(config: Config) -> RedisPool:
    """The dashboard's pool of ``config``: ``web_pool_size`` connections, built
    on first use and reset with the configuration's other pools."""
    return config.web_redis_pool
