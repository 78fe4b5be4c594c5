"""Which keys of one configuration mean something, and what to say about the rest.

An unknown key is warned about, never refused: the configuration is an open
hash that third-party middleware reads its own keys from, and a plugin's
settings are only known once it has loaded, which is usually after the
application wrote them. A key close to a known one is almost always a typo of
it, though, and a typo silently does nothing; so is a feature's setting
written while the feature is missing. So each unknown key is looked at when
it is written and, if nothing was known to match it then, once more when the
plugins have loaded.
"""

from __future__ import annotations

import difflib
import logging
from collections.abc import Callable, Iterator, MutableMapping
from contextlib import contextmanager
from typing import Any

from wurk.config.settings import SettingRegistry, core_settings, published_settings
from wurk.errors import ConfigurationError

#: How alike (0..1, difflib's ratio) a new key must be to a known option to
#: count as a misspelling of it: "concurency" and "timeouts" are, Sidekiq-era
#: YAML keys such as "pidfile" or "schedule" are not.
TYPO_CUTOFF = 0.8


class KnownKeys:
    """The declared settings of one configuration, and its unknown-key checks.

    ``logger`` is a callable so that the configuration's current logger (which
    the application may replace) is the one warned on.
    """

    def __init__(self, logger: Callable[[], logging.Logger]) -> None:
        self._logger = logger
        #: Core's settings until the plugins load, then everyone's.
        self.settings: SettingRegistry = core_settings()
        self.loaded = False
        self._declaring = False
        self._declared: set[str] = set()  # keys plugins wrote in wurk_configure
        self._unchecked: set[str] = set()
        self._published: dict[str, str] | None = None

    @property
    def published(self) -> dict[str, str]:
        """The settings installed distributions publish (name -> distribution),
        read from their metadata once, when an unknown key first needs it."""
        if self._published is None:
            self._published = published_settings()
        return self._published

    def is_known(self, key: str) -> bool:
        return key in self.settings or key in self._declared

    @contextmanager
    def declaring(self) -> Iterator[None]:
        """While a plugin's ``wurk_configure`` runs, the keys it writes are its own."""
        self._declaring = True
        try:
            yield
        finally:
            self._declaring = False

    def note_declared(self, key: str) -> None:
        if self._declaring:
            self._declared.add(key)

    def note_unknown(self, key: str) -> None:
        """A key no setting declares is being written for the first time."""
        if self._declaring:
            self._declared.add(key)
        elif self.loaded:
            self._check(key)
        elif key in self.published or not self._suggest(key):
            self._unchecked.add(key)  # looked at again once the plugins are loaded

    def _check(self, key: str) -> None:
        if key in self._declared:
            return
        distribution = self.published.get(key)
        if distribution is None:
            self._suggest(key)
            return
        self._logger().warning(
            "option %r is a setting of %s, whose plugin is not loaded (switched off in WURK_DISABLE_PLUGINS "
            "or config['disabled_plugins'], or left out of config['plugins'] with WURK_DISABLE_PLUGIN_AUTOLOAD "
            "set): it has no effect",
            key,
            distribution,
        )

    def _suggest(self, key: str) -> bool:
        """Warn if ``key`` looks like a misspelt known option; whether it did."""
        if not isinstance(key, str):
            return False
        known = self.settings.names() | self._declared | self.published.keys()
        close = difflib.get_close_matches(key, known, n=1, cutoff=TYPO_CUTOFF)
        if not close:
            return False
        self._logger().warning("unknown option %r; did you mean %r?", key, close[0])
        return True

    def adopt(self, settings: SettingRegistry, options: MutableMapping[str, Any]) -> None:
        """Take the loaded plugins' declarations: their defaults fill the keys
        still unset in ``options``."""
        self.settings, self.loaded = settings, True
        for setting in settings:
            if setting.has_default and setting.name not in options:
                options[setting.name] = setting.default_value()

    def check_pending(self, options: MutableMapping[str, Any]) -> None:
        """Check the keys written before the plugins loaded: a declared one's
        value goes through its check now (a bad one is dropped, its default
        restored, and the error raised, as the write would have been refused),
        the rest as any unknown key."""
        pending, self._unchecked = sorted(self._unchecked), set()
        for key in pending:
            setting = self.settings.get(key)
            if setting is None:
                self._check(key)
                continue
            try:
                options[key] = setting.validate(options[key])
            except ConfigurationError:
                del options[key]
                if setting.has_default:
                    options[key] = setting.default_value()
                raise
