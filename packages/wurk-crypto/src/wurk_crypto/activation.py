"""Turning encryption on for the process, and what that installs.

``enable`` makes the keyring the process's and installs the two middleware
into the configuration it is given (by default the one running the caller:
the process default in application code) and, through the plugin's
``wurk_register_middleware`` hook, into every configuration that loads its
plugins afterwards (one that switched the plugin off gets none). Nothing is
installed before, so a process that never enables pays nothing per job; the
``encrypt`` option's check still refuses to push a secret in clear text.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from wurk_crypto import keyring
from wurk_crypto.keyring import Resolver, Version
from wurk_crypto.middleware import DecryptServer, EncryptClient

if TYPE_CHECKING:
    from wurk.client.middleware import Chain
    from wurk.config.configuration import Config

#: The plugin's entry-point name, as ``WURK_DISABLE_PLUGINS`` spells it.
PLUGIN = "crypto"


def enable(active_version: Version, resolver: Resolver, *, config: Config | None = None) -> None:
    """Encrypt with ``active_version`` from now on; ``resolver(version)``
    returns the 32 raw bytes of any version, and raises ``KeyError`` (or
    ``IndexError``) for one it does not have.

    Process-wide. Calling it again replaces both and forgets every cached
    key. Call it at boot, before the worker starts, in every process that
    pushes or runs encrypted jobs. ``config`` names a configuration whose
    plugins already loaded (an embedded worker's built before this call);
    others get the middleware when they load their plugins.
    """
    from wurk.config.defaults import current_config

    keyring.use(active_version, resolver)
    config = config or current_config()
    if config.plugins.is_enabled(PLUGIN):
        install(config.client_middleware, config.server_middleware)


def disable() -> None:
    """Forget the keys (for tests): pushing an ``encrypt`` job is refused
    again, and an installed middleware refuses to run one."""
    keyring.forget()


def enabled() -> bool:
    """Whether :func:`enable` was called in this process (and not undone)."""
    return keyring.present()


def install(client: Chain, server: Chain) -> None:
    """Put both middleware in place, each once, innermost: the write gets the
    ciphertext whatever client middleware ran before, and only ``perform``
    (not the middleware around it) sees the plaintext."""
    if not client.exists(EncryptClient):
        client.add(EncryptClient)
    if not server.exists(DecryptServer):
        server.add(DecryptServer)


def coerce_encrypt(value: Any, job: Mapping[str, Any]) -> Any:
    """Refuse an ``encrypt`` job in a process that cannot encrypt it, rather
    than push its secret in clear text."""
    if value:
        keyring.current(str(job.get("class")))
    return value


__all__ = ["PLUGIN", "coerce_encrypt", "disable", "enable", "enabled", "install"]
