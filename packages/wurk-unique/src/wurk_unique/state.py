"""Whether unique jobs are on in this process, and what turning them on installs.

Uniqueness is process-wide and off until :func:`enable`, as Sidekiq
Enterprise's ``unique!``. Enabling installs the client middleware (lock on
push), the server middleware (release on start or success) and the death
handler (release on an automatic death) into the configuration it is given
(by default the one running the caller: the process default in application
code), and, through the plugin's ``wurk_register_middleware`` hook, into
every configuration that loads its plugins afterwards. A configuration
that switched the plugin off gets none of them. Nothing is installed before,
so a process that never enables pays nothing per push or per job.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from wurk.server.retry import death_reason
from wurk_unique import lock, switch
from wurk_unique.middleware import UniqueClient, UniqueServer

if TYPE_CHECKING:
    from wurk.client.middleware import Chain
    from wurk.config.configuration import Config

#: The plugin's entry-point name, as ``WURK_DISABLE_PLUGINS`` spells it.
PLUGIN = "unique"


def enabled() -> bool:
    """Whether :func:`enable` was called in this process (and not undone)."""
    return switch.is_on()


def enable(*, config: Config | None = None) -> None:
    """Turn unique jobs on for this process. Idempotent.

    Call it at boot, before the worker starts, in every process that enqueues
    and every process that runs jobs: a process without it pushes duplicates
    and never releases a lock. ``config`` names a configuration whose plugins
    already loaded (an embedded worker's built before this call); others get
    the middleware when they load their plugins.
    """
    from wurk.config.defaults import current_config

    switch.turn(True)
    config = config or current_config()
    if config.plugins.is_enabled(PLUGIN):
        install(config.client_middleware, config.server_middleware, config)


def disable() -> None:
    """Turn unique jobs off again (for tests). What was installed stays but
    does nothing: no lock is taken or released."""
    switch.turn(False)


class ReleaseOnDeath:
    """The death handler: a job that died by itself (out of retries,
    ``retry: False``, discarded) frees its lock so it can be pushed again;
    one killed by a person keeps it until the TTL, so an automated push
    cannot bring straight back what the operator removed."""

    def __init__(self, config: Config) -> None:
        self.config = config

    def __call__(self, job: dict[str, Any], exc: BaseException) -> None:
        if not switch.is_on() or not job.get("unique_for") or death_reason() == "killed":
            return
        key = lock.key_for(job, None, self.config)
        lock.release_quietly(self.config, self.config.redis_pool, key, job.get("jid"))

    def __repr__(self) -> str:
        return "<wurk_unique release on death>"


def install(client: Chain, server: Chain, config: Config) -> None:
    """Put the middleware and the death handler in place, each once."""
    # Client: appended, so middleware registered before it (a batch's) never
    # sees a duplicate it drops. Server: innermost, so the release follows
    # ``perform`` directly and nothing between them can fail the job.
    if not client.exists(UniqueClient):
        client.add(UniqueClient)
    if not server.exists(UniqueServer):
        server.add(UniqueServer)
    handlers = config.death_handlers
    if not any(isinstance(handler, ReleaseOnDeath) for handler in handlers):
        # In place, as ``config.death_handlers.append``: a frozen
        # configuration still takes it.
        handlers.append(ReleaseOnDeath(config))


__all__ = ["PLUGIN", "ReleaseOnDeath", "disable", "enable", "enabled", "install"]
