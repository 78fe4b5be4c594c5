"""Named shards: several Redis servers for one application.

A fleet that outgrows one Redis splits its queues across several. Each
shard is a whole Sidekiq keyspace of its own (queues, schedule, retries,
processes, and every plugin's keys), so a job lives on exactly one shard, and a
worker serves exactly one: the one it was started on (``wurk --shard east``,
which makes the shard the worker's main Redis).

The ``shards`` setting names them, each with a URL or with the same
connection options as ``config.redis``::

    config["shards"] = {
        "east": "redis://east.internal:6379/0",
        "west": {"url": "rediss://west.internal:6380/0", "ssl_ca_certs": "/etc/ssl/ca.pem"},
    }

and ``WURK_SHARDS=east=redis://…,west=rediss://…`` is read when the setting
is unset (for the command line and the dashboard, which read no application
code). A name then stands wherever a pool does: a job's ``pool="east"``
option, ``Job.set(pool="east")``, ``Client(pool="east")``, the data API's
``pool="east"``, :func:`via` for a block of code. A name nobody configured
is refused in one line naming the configured ones.

The main Redis (``config.redis``, ``REDIS_URL``) is not a shard: it is where
a job goes when nothing routes it, and the dashboard and the command line
call it ``default``, a name no shard may take.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from wurk.config import env
from wurk.current import routed_pool
from wurk.errors import ConfigurationError
from wurk.redis.connection import mask_url

if TYPE_CHECKING:
    from wurk.config.configuration import Config
    from wurk.redis.connection import RedisPool

#: The environment variable read when ``shards`` is unset.
SHARDS_ENV = "WURK_SHARDS"
#: What the dashboard and the command line call the main Redis.
DEFAULT_NAME = "default"
#: A shard's name: it shows in URLs (``/shard/east/``) and on command lines.
NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
# ``name=scheme://`` starts an entry of WURK_SHARDS; a comma inside a URL (a
# Sentinel URL lists several hosts) is followed by no such thing.
_ENTRY = re.compile(r"[,\s]+(?=[A-Za-z0-9_-]+=[A-Za-z][A-Za-z0-9+.-]*://)")


def check_name(key: str, name: Any) -> str:
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise ConfigurationError(
            f"{key}: a shard's name is 1 to 64 letters, digits, '-' or '_' (it shows in URLs), got {_shown(name)}"
        )
    if name == DEFAULT_NAME:
        raise ConfigurationError(
            f"{key}: {DEFAULT_NAME!r} names the main Redis (config.redis); call the shard otherwise"
        )
    return name


def check_shards(key: str, value: Any) -> dict[str, dict[str, Any]] | None:
    """The check of the ``shards`` setting: a mapping of names to a URL or to
    connection options (``config.redis``'s keys); its normal form maps every
    name to options."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise ConfigurationError(
            f"{key} must map shard names to a Redis URL or to connection options, got {_shown(value)}"
        )
    shards: dict[str, dict[str, Any]] = {}
    for name, spec in value.items():
        check_name(key, name)
        if isinstance(spec, str) and spec:
            shards[name] = {"url": spec}
        elif isinstance(spec, Mapping) and (spec.get("url") or spec.get("sentinels")):
            shards[name] = dict(spec)
        else:
            raise ConfigurationError(
                f"{key}.{name} must be a Redis URL or a mapping with a 'url' (and options such as ssl_ca_certs), "
                f"got {_shown(spec)}"
            )
    return shards


def _shown(value: Any) -> str:
    """A refused value as an error message may show it: never a password (a
    URL's is masked, a mapping shows its keys alone)."""
    if isinstance(value, str):
        return repr(mask_url(value)) if value else "an empty string"
    if isinstance(value, Mapping):
        return f"a mapping of {sorted(str(key) for key in value)}"
    return f"a value of type {type(value).__name__}"


def shards_from_env(environ: Mapping[str, str] | None = None) -> dict[str, dict[str, Any]] | None:
    """``WURK_SHARDS`` (or ``SIDEKIQ_SHARDS``): ``name=url`` entries separated
    by commas or spaces."""
    raw = (env.get("SHARDS", environ) or "").strip()
    if not raw:
        return None
    entries: dict[str, str] = {}
    for entry in _ENTRY.split(raw):
        name, sep, url = entry.strip().partition("=")
        if not sep or not url:
            raise ConfigurationError(f"{SHARDS_ENV}: {mask_url(entry.strip())!r} is not name=redis://host:port/db")
        entries[name] = url
    return check_shards(SHARDS_ENV, entries)


def unknown_shard(name: Any, known: Iterable[str]) -> ConfigurationError:
    """The one-line refusal of a shard nobody configured."""
    names = sorted(known)
    if not names:
        return ConfigurationError(
            f"unknown shard {name!r}: no shards are configured (set 'shards' in the config file or "
            f"config['shards'], or {SHARDS_ENV})"
        )
    close = difflib.get_close_matches(str(name), names, n=1, cutoff=0.6)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return ConfigurationError(f"unknown shard {name!r}{hint} (configured shards: {', '.join(names)})")


def shard(name: str, config: Config | None = None) -> RedisPool:
    """The pool of shard ``name`` of ``config`` (of the configuration running
    this code when not given): ``wurk.shard("east")``."""
    if config is None:
        from wurk.config.defaults import current_config

        config = current_config()
    return config.shard(name)


def resolve(config: Config, pool: RedisPool | str | None) -> RedisPool | None:
    """A pool as given where a pool is accepted: a shard's name becomes its pool."""
    if isinstance(pool, str):
        return config.shard(pool)
    return pool


@contextmanager
def via(pool: RedisPool | str, config: Config | None = None) -> Iterator[RedisPool]:
    """Send everything ``config`` does with Redis in this block to ``pool``
    (a shard's name or a pool): pushes, what plugins keep beside them
    (unique locks, say), the data API. Sidekiq's ``Sidekiq::Client.via``::

        with wurk.via("east"):
            Report.perform_async(1)
            waiting = wurk.api.Queue().size  # east's default queue

    It holds for this thread (this context) only, and for ``config`` only
    (the configuration running this code when not given).
    """
    if config is None:
        from wurk.config.defaults import current_config

        config = current_config()
    resolved = resolve(config, pool)
    if resolved is None:
        raise ConfigurationError("via needs a shard's name or a pool, got None")
    token = routed_pool.set((config, resolved))
    try:
        yield resolved
    finally:
        routed_pool.reset(token)
