"""The statsd client of one configuration.

Built on first use, once per process: a client holds a socket, and a forked
child that wrote on its parent's would interleave their datagrams. It comes
from the ``config.dogstatsd`` factory when one is set, and otherwise from the
``statsd`` setting, which needs no code::

    statsd:
      host: metrics.internal
      port: 8125
      prefix: sidekiq

The setting builds the ``statsd`` package's ``StatsClient`` (the
``wurk-core[statsd]`` extra), or with ``dogstatsd: true`` the ``datadog``
package's ``DogStatsd``, which also sends each job's ``worker:`` and
``queue:`` tags and the setting's ``tags``. The job metrics it sends are
:mod:`wurk.metrics.statsd`'s; this module only owns the client.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from wurk.config.configuration import Config


def client_from_setting(setting: Mapping[str, Any]) -> Any:
    """A new client for the ``statsd`` setting (in its normal form)."""
    if setting["dogstatsd"]:
        from datadog.dogstatsd.base import DogStatsd

        return DogStatsd(
            host=setting["host"],
            port=setting["port"],
            namespace=setting["prefix"],
            constant_tags=setting["tags"] or None,
            disable_telemetry=True,
        )
    import statsd

    return statsd.StatsClient(setting["host"], setting["port"], prefix=setting["prefix"])


class StatsdClient:
    """Builds, uses and lets go of ``config.dogstatsd()``'s client."""

    def __init__(self, config: Config) -> None:
        self._config = config
        self._client: Any = None
        self._failed = False

    @property
    def client(self) -> Any:
        """The client, or ``None`` while neither ``config.dogstatsd`` nor the
        ``statsd`` setting is set.

        A client that cannot be built (a host name that does not resolve) is
        reported once, and this process then runs without statsd rather than
        failing each job that would have been counted.
        """
        if self._client is not None or self._failed:
            return self._client
        config = self._config
        factory = config.dogstatsd
        setting = config.option("statsd")
        if factory is None and setting is None:
            return None
        try:
            self._client = factory() if factory is not None else client_from_setting(setting)
        except Exception as exc:
            self._failed = True
            config.handle_exception(exc, {"context": "statsd client: this process sends no statsd metrics"})
        return self._client

    def increment(self, metric: str, **tags: Any) -> None:
        """Count ``metric`` once; a failing client is reported, never raised,
        since a metric must not fail the job or the loop that counts it."""
        client = self.client
        if client is None:
            return
        try:
            if hasattr(client, "incr"):
                client.incr(metric)
            else:
                client.increment(metric, tags=[f"{name}:{value}" for name, value in tags.items()] or None)
        except Exception as exc:
            self._config.handle_exception(exc, {"context": f"statsd {metric}"})

    def reset_after_fork(self) -> None:
        """In a forked child: drop the parent's client; the next use builds one."""
        client, self._client = self._client, None
        self._failed = False
        if client is not None:
            from wurk.metrics.statsd import discard_after_fork

            discard_after_fork(client)
