"""The statsd client of one configuration.

Built on first use from the ``config.dogstatsd`` factory, once per process: a
client holds a socket, and a forked child that wrote on its parent's would
interleave their datagrams. The job metrics it sends are
:mod:`wurk.metrics.statsd`'s; this module only owns the client.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from wurk.config.configuration import Config


class StatsdClient:
    """Builds, uses and lets go of ``config.dogstatsd()``'s client."""

    def __init__(self, config: Config) -> None:
        self._config = config
        self._client: Any = None

    @property
    def client(self) -> Any:
        """The client, or ``None`` while ``config.dogstatsd`` is unset."""
        if self._client is None and self._config.dogstatsd is not None:
            self._client = self._config.dogstatsd()
        return self._client

    def increment(self, metric: str, **tags: Any) -> None:
        """Count ``metric`` once; a failing client is reported, never raised,
        since a metric must not fail the job or the loop that counts it."""
        client = self.client
        if client is None:
            return
        try:
            client.incr(metric) if hasattr(client, "incr") else client.increment(metric, tags=tags or None)
        except Exception as exc:
            self._config.handle_exception(exc, {"context": f"statsd {metric}"})

    def reset_after_fork(self) -> None:
        """In a forked child: drop the parent's client; the next use builds one."""
        client, self._client = self._client, None
        if client is not None:
            from wurk.metrics.statsd import discard_after_fork

            discard_after_fork(client)
