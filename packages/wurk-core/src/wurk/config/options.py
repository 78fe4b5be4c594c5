"""Who owns which job option.

Job options are open, as in Sidekiq: any key set with ``queue=…``-style class
keywords or ``set(...)`` travels in the payload, so custom middleware can read
its own options. But some option names belong to feature distributions
(``unique_for`` to wurk-unique, ``encrypt`` to wurk-crypto). Setting one of
those while its plugin is missing or disabled would silently do nothing, which
is the worst outcome for a lock or an encryption flag, so it fails instead with
a hint naming the distribution.

A plugin that is switched off is never imported, so it cannot declare its
options; its distribution names them in its metadata instead, under the
``wurk.options`` entry-point group (``audit = "wurk_audit.plugin"``), read
without importing anything. A job that sets one of those options while the
plugin is switched off is refused, naming the option, the plugin and how it
was switched off. The hint table below covers Wurk's own features when they
are not even installed.

The same holds while a feature distribution is installed but its feature is
not built yet: it declares its options with ``implemented=False``, so a job
that asks for encryption or a lock is refused before anything is written,
rather than pushed in clear text or without the lock. Building the feature
only flips that flag.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, MutableMapping
from importlib import metadata
from typing import TYPE_CHECKING, Any

from wurk.config.settings import distribution_name
from wurk.errors import UnknownOptionError

if TYPE_CHECKING:
    from wurk.plugins.manager import SwitchedOff

#: ``coerce(value, job) -> value``: checks a feature option a job sets and
#: returns what the payload carries (a ``timedelta`` as seconds, say); raises
#: to refuse the push. ``job`` is the normalised payload, read-only.
Coercer = Callable[[Any, Mapping[str, Any]], Any]

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

#: Options that only mean something when a feature distribution is active: a
#: hint table naming the distribution to install, nothing more (STYLE rule 6);
#: the plugin declares the option itself, through ``wurk_register_options``.
FEATURE_OPTIONS = {
    "unique_for": "wurk-unique",
    "unique_until": "wurk-unique",
    "encrypt": "wurk-crypto",
}

#: The entry-point group in which a distribution names the job options its
#: plugin declares (``audit = "wurk_audit.plugin"``): read without importing
#: anything, so that an option whose plugin is switched off can be refused
#: naming that plugin. The option's meaning and coercion stay the plugin's
#: own, declared through ``wurk_register_options``.
OPTIONS_ENTRY_POINT_GROUP = "wurk.options"


def published_options() -> dict[str, str]:
    """Each job option an installed distribution publishes, and that distribution's name."""
    published: dict[str, str] = {}
    for ep in metadata.entry_points(group=OPTIONS_ENTRY_POINT_GROUP):
        published.setdefault(ep.name, distribution_name(ep))
    return published


def _missing_hint(name: str, distribution: str) -> str:
    return (
        f"job option {name!r} needs the {distribution} plugin: "
        f"is {distribution} installed, and not disabled in WURK_DISABLE_PLUGINS "
        f"or config['disabled_plugins']?"
    )


class OptionRegistry:
    """The job options declared by core and by the active plugins."""

    def __init__(self) -> None:
        self._owners: dict[str, str] = dict.fromkeys(CORE_OPTIONS, "wurk-core")
        self._unimplemented: set[str] = set()
        self._coercers: dict[str, Coercer] = {}
        #: Option -> why a job may not set it while nobody owns it.
        self._refusals: dict[str, str] = {name: _missing_hint(name, dist) for name, dist in FEATURE_OPTIONS.items()}

    def add(self, name: str, owner: str, *, implemented: bool = True, coerce: Coercer | None = None) -> None:
        """Declare that ``owner`` (a distribution or plugin name) handles ``name``.

        ``implemented=False`` claims the name for a feature that is not built
        yet: the option is reserved for ``owner``, and a job that sets it is
        refused instead of being pushed as if the feature were there.

        ``coerce(value, job)`` runs on every push that sets the option, before
        the client middleware, whether or not the feature is switched on in
        this process: it refuses a bad value with a clear error (nothing is
        written) and returns the value the payload carries, so an option
        given as a ``timedelta`` still reaches Redis as JSON.
        """
        current = self._owners.get(name)
        if current is not None and current != owner:
            raise ValueError(f"job option {name!r} is already owned by {current}, not {owner}")
        self._owners[name] = owner
        if implemented:
            self._unimplemented.discard(name)
        else:
            self._unimplemented.add(name)
        if coerce is not None:
            self._coercers[name] = coerce

    def owner(self, name: str) -> str | None:
        return self._owners.get(name)

    def refuse_switched_off(self, switched_off: Iterable[SwitchedOff]) -> None:
        """Refuse the options that the distributions of the ``switched_off``
        plugins publish (``wurk.options``) and no active plugin declared,
        naming the plugin: it is installed, so its option is no typo, but
        nothing would honour it. Reads the metadata only when some plugin is off."""
        plugins: dict[str, list[SwitchedOff]] = {}
        for plugin in switched_off:
            plugins.setdefault(plugin.distribution, []).append(plugin)
        if not plugins:
            return
        for name, distribution in published_options().items():
            off = plugins.get(distribution)
            if off is None or name in self._owners:
                continue
            which = " or ".join(repr(plugin.name) for plugin in off)
            self._refusals[name] = (
                f"job option {name!r} belongs to the {which} plugin of {distribution}, which is "
                f"{off[0].how()}; switch the plugin on, or push the job without {name!r}. Nothing was pushed"
            )

    def implemented(self, name: str) -> bool:
        """Whether a job may set ``name`` now: owned, and its feature built."""
        return name in self._owners and name not in self._unimplemented

    def names(self) -> frozenset[str]:
        return frozenset(self._owners)

    def coerce(self, job: MutableMapping[str, Any]) -> None:
        """Run each coercer of an option ``job`` sets, in place."""
        if not self._coercers:
            return
        for name, coercer in self._coercers.items():
            if name in job:
                job[name] = coercer(job[name], job)

    def check(self, options: Mapping[str, object] | Iterable[str]) -> None:
        """Raise if an option belongs to a feature that cannot honour it now:
        its plugin is not active, or the plugin does not implement it yet."""
        job = options.get("class") if isinstance(options, Mapping) else None
        prefix = f"job {job}: " if isinstance(job, str) else ""
        for name in options:
            if name in self._unimplemented:
                raise UnknownOptionError(
                    f"{prefix}the {name!r} option needs {self._owners[name]}, "
                    "which does not implement it yet; nothing was pushed"
                )
            refusal = self._refusals.get(name)
            if refusal is not None and name not in self._owners:
                raise UnknownOptionError(prefix + refusal)
