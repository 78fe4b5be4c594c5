"""Who owns which job option.

Job options are open, as in Sidekiq: any key set with ``queue=…``-style class
keywords or ``set(...)`` travels in the payload, so custom middleware can read
its own options. But some option names belong to feature distributions
(``unique_for`` to wurk-unique, ``encrypt`` to wurk-crypto). Setting one of
those while its plugin is missing or disabled would silently do nothing, which
is the worst outcome for a lock or an encryption flag, so it fails instead with
a hint naming the distribution.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from wurk.errors import UnknownOptionError

#: Options core itself understands.
CORE_OPTIONS = (
    "queue",
    "retry",
    "dead",
    "backtrace",
    "retry_queue",
    "retry_for",
    "tags",
    "expires_in",
    "pool",
)

#: Options that only mean something when a feature distribution is active.
FEATURE_OPTIONS = {
    "unique_for": "wurk-unique",
    "unique_until": "wurk-unique",
    "encrypt": "wurk-crypto",
}


class OptionRegistry:
    """The job options declared by core and by the active plugins."""

    def __init__(self) -> None:
        self._owners: dict[str, str] = dict.fromkeys(CORE_OPTIONS, "wurk-core")

    def add(self, name: str, owner: str) -> None:
        """Declare that ``owner`` (a distribution or plugin name) handles ``name``."""
        current = self._owners.get(name)
        if current is not None and current != owner:
            raise ValueError(f"job option {name!r} is already owned by {current}, not {owner}")
        self._owners[name] = owner

    def owner(self, name: str) -> str | None:
        return self._owners.get(name)

    def names(self) -> frozenset[str]:
        return frozenset(self._owners)

    def check(self, options: Mapping[str, object] | Iterable[str]) -> None:
        """Raise if an option belongs to a feature whose plugin is not active."""
        for name in options:
            distribution = FEATURE_OPTIONS.get(name)
            if distribution is not None and name not in self._owners:
                raise UnknownOptionError(
                    f"job option {name!r} needs the {distribution} plugin: "
                    f"is {distribution} installed, and not disabled in WURK_DISABLE_PLUGINS "
                    f"or config['disabled_plugins']?"
                )
