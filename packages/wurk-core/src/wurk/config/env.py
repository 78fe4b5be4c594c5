"""Environment variables Wurk reads, native name first.

Each setting is read as ``WURK_<NAME>`` and, when that is unset, as the
``SIDEKIQ_<NAME>`` alias, so a Sidekiq deployment's environment carries over.
Values are read where they are used (never cached at import), so a test or an
embedding host can change them before the component that needs them starts.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

FALSE_STRINGS = frozenset({"", "0", "false", "no", "off"})


def get(name: str, environ: Mapping[str, str] | None = None) -> str | None:
    """``WURK_<name>``, else ``SIDEKIQ_<name>``, else ``None``."""
    env = os.environ if environ is None else environ
    value = env.get(f"WURK_{name}")
    if value is None:
        value = env.get(f"SIDEKIQ_{name}")
    return value


def truthy(value: str | None) -> bool:
    """The guides' reading of a flag: unset, empty, 0, false, no and off are off."""
    return value is not None and value.strip().lower() not in FALSE_STRINGS


def leader_opted_out(environ: Mapping[str, str] | None = None) -> bool:
    """``WURK_LEADER=false`` keeps this process out of leader elections."""
    raw = get("LEADER", environ)
    return raw is not None and raw.strip().lower() == "false"


def web_read_only(environ: Mapping[str, str] | None = None) -> bool:
    env = os.environ if environ is None else environ
    return truthy(env.get("WURK_WEB_READ_ONLY"))


def debug(environ: Mapping[str, str] | None = None) -> bool:
    """``WURK_DEBUG`` (any value) makes the default error handler log tracebacks."""
    return get("DEBUG", environ) is not None


def disabled(environ: Mapping[str, str] | None = None) -> bool:
    env = os.environ if environ is None else environ
    return env.get("WURK_DISABLED") == "1"


def environment(flag: str | None = None, environ: Mapping[str, str] | None = None) -> str:
    """The app environment: ``-e`` flag, then APP_ENV, RAILS_ENV, RACK_ENV."""
    env = os.environ if environ is None else environ
    for value in (flag, env.get("APP_ENV"), env.get("RAILS_ENV"), env.get("RACK_ENV")):
        if value:
            return value
    return "development"


def max_threads(environ: Mapping[str, str] | None = None) -> int | None:
    """``RAILS_MAX_THREADS``, the fallback concurrency when no flag or YAML sets one."""
    env = os.environ if environ is None else environ
    raw = env.get("RAILS_MAX_THREADS")
    try:
        value = int(raw) if raw else None
    except ValueError:
        return None
    return value if value and value > 0 else None


def hostname(environ: Mapping[str, str] | None = None) -> str:
    """``DYNO`` when set (Heroku), else the system host name."""
    import socket

    env = os.environ if environ is None else environ
    return env.get("DYNO") or socket.gethostname()
