"""A primary found through Redis Sentinel: its URL, its options, its pool.

Sentinel watches a primary and its replicas and, when the primary dies,
promotes a replica; a client asks the sentinels where the primary is each
time it connects. Two ways say the same thing, and may be mixed:

* the URL Kombu and Celery users know, in ``REDIS_URL``, ``config.redis["url"]``
  or the YAML file's ``redis: url:``::

      redis+sentinel://[[user]:password@]host[:port][,host[:port]…]/service_name[/db][?sentinel_password=…]

  The URL's password (and user) are the *data* credentials, those of the
  primary and its replicas, as in a ``redis://`` URL. The sentinels have
  their own (``requirepass`` in ``sentinel.conf``), given in the query as
  ``sentinel_password`` (and ``sentinel_username`` for an ACL user). A port
  left out is Sentinel's 26379. Any other query option is a redis-py
  connection option, as in a ``redis://`` URL.

* keys of ``config.redis`` (or the YAML ``redis:`` section): ``sentinels``
  (``["10.0.0.1:26379", ...]`` or ``[("10.0.0.1", 26379), ...]``),
  ``master_name``, ``db``, ``username``/``password``, and
  ``sentinel_username``/``sentinel_password``. With a plain ``redis://``
  URL beside them, the URL gives only the database and the credentials.

A key of ``config.redis`` gives way to the same setting in the URL, as it
does for a ``redis://`` URL (redis-py lets the URL win). TLS to the
sentinels and the data nodes (``rediss+sentinel://``) is refused with an
error saying so: it is not tested here, and a setting that silently spoke
plain text to a TLS deployment would be worse than none.

Every pool of a configuration goes through :class:`wurk.redis.connection.RedisPool`,
which hands a Sentinel setup to :func:`sentinel_pool`: the worker's pools,
the client's, the dashboard's, the CLI's, a swarm child's, an embedded
worker's. Where a pool's URL is shown, it is :func:`display_url`'s form,
which holds no secret.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qsl, unquote, urlencode

from redis.connection import parse_url
from redis.sentinel import Sentinel, SentinelConnectionPool

from wurk.errors import ConfigurationError

SCHEMES = ("redis+sentinel", "rediss+sentinel")
DEFAULT_PORT = 26379
#: The query options that configure the sentinels rather than the data connections.
SENTINEL_CREDENTIALS = ("sentinel_username", "sentinel_password")


def is_sentinel_url(url: str | None) -> bool:
    return bool(url) and str(url).partition("://")[0] in SCHEMES


def _problem(shown: str, what: str) -> ConfigurationError:
    return ConfigurationError(f"Redis URL {shown!r}: {what}")


def parse_sentinel_url(url: str, shown: str) -> dict[str, Any]:
    """The ``config.redis`` options a ``redis+sentinel://`` URL stands for.

    ``shown`` is the URL as an error may show it (its passwords masked).
    """
    scheme, _, rest = url.partition("://")
    if scheme == "rediss+sentinel":
        raise _problem(
            shown,
            "TLS to Sentinel (rediss+sentinel://) is not supported; use redis+sentinel:// on a trusted network, "
            "or a rediss:// URL to the primary itself.",
        )
    rest, _, query = rest.partition("?")
    rest = rest.partition("#")[0]
    netloc, _, path = rest.partition("/")
    userinfo, at, hosts = netloc.rpartition("@")
    options: dict[str, Any] = {}
    if at:
        user, colon, password = userinfo.partition(":")
        if user:
            options["username"] = unquote(user)
        if colon:
            options["password"] = unquote(password)
    options["sentinels"] = [_address(entry, shown) for entry in hosts.split(",")] if hosts else []
    if not options["sentinels"]:
        raise _problem(shown, "names no sentinel; write redis+sentinel://host:26379[,host:26379…]/service_name/0.")
    segments = [segment for segment in path.split("/") if segment] if path else []
    if not segments:
        raise _problem(shown, "names no service; the path is the service name, as in /mymaster or /mymaster/0.")
    if len(segments) > 2:
        raise _problem(shown, "has a path of more than two parts; write /service_name or /service_name/db.")
    options["master_name"] = unquote(segments[0])
    if len(segments) == 2:
        if not segments[1].isdigit():
            raise _problem(shown, f"the database {segments[1]!r} is not a whole number; write /service_name/0.")
        options["db"] = int(segments[1])
    pairs = parse_qsl(query, keep_blank_values=True)
    for key, value in pairs:
        if key in SENTINEL_CREDENTIALS:
            options[key] = value
        elif key.startswith("ssl"):
            raise _problem(shown, f"{key} needs TLS, which redis+sentinel:// does not use.")
    rest_query = urlencode([(key, value) for key, value in pairs if key not in SENTINEL_CREDENTIALS])
    if rest_query:
        try:
            extra = parse_url(f"redis://localhost/0?{rest_query}")
        except ValueError as exc:
            raise _problem(shown, str(exc)) from None
        options.update({key: value for key, value in extra.items() if key not in ("host", "db")})
    return options


def _address(entry: str, shown: str) -> tuple[str, int]:
    """``host``, ``host:port`` or ``[v6]:port`` as an address."""
    entry = entry.strip()
    if entry.startswith("["):
        host, _, after = entry[1:].partition("]")
        port = after[1:] if after.startswith(":") else ""
    else:
        host, colon, port = entry.rpartition(":")
        if not colon:
            host, port = entry, ""
    if not host:
        raise _problem(shown, f"the sentinel address {entry!r} has no host.")
    if port and not port.isdigit():
        raise _problem(shown, f"the sentinel address {entry!r} has a port that is not a number.")
    return host, int(port) if port else DEFAULT_PORT


def _sentinel_address(entry: Any) -> tuple[str, int]:
    """One entry of ``config.redis["sentinels"]``: ``"host:port"`` or ``(host, port)``."""
    if isinstance(entry, str):
        return _address(entry, f"sentinels: {entry}")
    try:
        host, port = entry
        return str(host), int(port)
    except (TypeError, ValueError):
        raise ConfigurationError(
            f"config.redis['sentinels'] entry {entry!r} is not an address; write 'host:26379' or ('host', 26379)"
        ) from None


def display_url(options: Mapping[str, Any]) -> str:
    """The setup as a ``redis+sentinel://`` URL without any secret, for logs and errors."""
    hosts = ",".join(f"{host}:{port}" for host, port in options["sentinels"])
    user = options.get("username")
    userinfo = f"{user}:***@" if user else (":***@" if options.get("password") else "")
    return f"redis+sentinel://{userinfo}{hosts}/{options['master_name']}/{options.get('db', 0)}"


def sentinel_options(url: str | None, options: Mapping[str, Any], shown: str) -> dict[str, Any]:
    """The connection options of a Sentinel setup: ``options`` (``config.redis``
    without the pool's own keys) with the URL's parts over them, the
    sentinel addresses checked."""
    merged = dict(options)
    if url and is_sentinel_url(url):
        merged.update(parse_sentinel_url(url, shown))
    elif url:  # a plain URL beside ``sentinels``: its database and credentials
        extra = parse_url(url)
        for key in ("db", "username", "password"):
            if extra.get(key) is not None:
                merged.setdefault(key, extra[key])
    merged["sentinels"] = [_sentinel_address(entry) for entry in merged.get("sentinels") or ()]
    if not merged["sentinels"]:
        raise ConfigurationError("config.redis names no sentinel: set 'sentinels' to ['host:26379', ...]")
    if not merged.get("master_name"):
        raise ConfigurationError(
            "config.redis['sentinels'] needs 'master_name' too: the service name the sentinels monitor"
        )
    return merged


def sentinel_pool(
    pool_class: type[SentinelConnectionPool], options: dict[str, Any], common: Mapping[str, Any], **pool_kwargs: Any
) -> SentinelConnectionPool:
    """A pool of ``pool_class`` (a SentinelConnectionPool) on the primary
    the sentinels name, its connections opened with ``common`` and the data
    options. The sentinels are asked with the same timeouts and their own
    credentials."""
    opts = dict(options)
    sentinels = opts.pop("sentinels")
    master_name = opts.pop("master_name")
    sentinel_kwargs = {
        "socket_timeout": common["socket_timeout"],
        "socket_connect_timeout": common["socket_connect_timeout"],
    }
    for key in SENTINEL_CREDENTIALS:
        value = opts.pop(key, None)
        if value is not None:
            sentinel_kwargs[key.removeprefix("sentinel_")] = value
    sentinel_kwargs.update(opts.pop("sentinel_kwargs", None) or {})
    manager = Sentinel(sentinels, sentinel_kwargs=sentinel_kwargs)
    return pool_class(master_name, manager, **pool_kwargs, **common, **opts)
