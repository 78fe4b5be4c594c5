"""The dashboard's own Redis pool.

The dashboard keeps a pool apart from the worker's, so that a page full of
queries never starves a processor of connections, and sizes it by its own
setting, ``web_pool_size``. Core knows nothing of it: the pool is one of the
configuration's shared pools, asked for by name.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from wurk.errors import ConfigurationError

if TYPE_CHECKING:
    from wurk.config.configuration import Config
    from wurk.redis.connection import RedisPool

#: The pool's name, as the shared pools and the logs know it.
POOL_NAME = "web"

#: Seconds the dashboard waits for a free connection: a page that cannot get
#: one soon should say so rather than hang the browser.
WEB_POOL_TIMEOUT = 1.0


def redis_pool(config: Config) -> RedisPool:
    """The dashboard's pool of ``config``: ``web_pool_size`` connections, built
    on first use and reset with the configuration's other pools."""
    try:
        size = int(config["web_pool_size"])
    except KeyError:
        raise ConfigurationError(
            "the web pool is sized by web_pool_size, a setting of the wurk-web plugin: "
            "is wurk-web enabled, and not disabled in WURK_DISABLE_PLUGINS "
            "or config['disabled_plugins']?"
        ) from None
    return config.shared_redis_pool(POOL_NAME, size, pool_timeout=WEB_POOL_TIMEOUT)
