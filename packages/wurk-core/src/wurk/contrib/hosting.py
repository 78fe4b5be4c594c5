"""What every web framework integration shares: the application's settings
turned into a configuration, and the embedded worker a web process may run.

The settings are the keys of the YAML file (``redis``, ``queues``,
``concurrency``, ``capsules``..., Sidekiq's ``:key:`` spelling, a section per
environment merged over the rest), read by the same code as the file. Unlike a
key written straight into a configuration, which is only warned about (third
parties read keys of their own from it), a misspelt key in the framework's
settings is refused: it sits in a file the user wrote for Wurk alone, and a
typo there would silently do nothing.

An embedded worker runs beside the requests, in the web process's own
threads. Two kinds of web process must not run one, as the guides say of
Puma's cluster mode:

* a process told not to: ``WURK_DISABLED=1`` keeps a web role to serving
  requests and enqueueing, while the jobs run in a ``wurk`` process of their own;
* a worker of a preforking server (gunicorn, uWSGI). Every one of its worker
  processes would run worker threads of its own, multiplied by the server's
  worker count and restarted at the server's whim; and an application loaded
  before the fork (``--preload``) would start its threads in the master,
  where the fork leaves them behind. Detection is best effort: gunicorn's
  arbiter sets ``SERVER_SOFTWARE`` for its workers and is imported in them,
  uWSGI's workers hold its ``uwsgi`` module.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import Any

from wurk.cli import boot
from wurk.config import env
from wurk.config.configuration import Config
from wurk.errors import ConfigurationError
from wurk.server.embedded import Embedded, configure_embed

#: Options that decide which plugins load: written before the other keys are
#: checked, since checking a key loads the plugins.
PLUGIN_SWITCHES = ("plugins", "disabled_plugins")


def configure_from(config: Config, settings: Mapping[str, Any], source: str) -> dict[str, Any]:
    """Write the application's Wurk settings (``source`` names them in errors)
    into ``config``, as a config file's, refusing a key that looks like a
    misspelt option; returns the options applied."""
    if not isinstance(settings, Mapping):
        raise ConfigurationError(f"{source} must be a mapping of Wurk options, got {type(settings).__name__}")
    options = boot.options_from(settings, env.environment(None))
    options.pop("environment", None)  # chosen by APP_ENV, as for a config file
    config.update({key: options.pop(key) for key in PLUGIN_SWITCHES if key in options})
    boot.refuse_misspelt(config, options, source)
    boot.apply_options(config, options)
    return options


def preforking_server(environ: Mapping[str, str] | None = None) -> str | None:
    """The preforking web server this process is a worker of, if any."""
    environ = os.environ if environ is None else environ
    if "gunicorn" in environ.get("SERVER_SOFTWARE", "").lower() or "gunicorn.arbiter" in sys.modules:
        return "gunicorn"
    if "uwsgi" in sys.modules:
        return "uWSGI"
    return None


def start_embedded(config: Config, options: Mapping[str, Any] | None = None) -> Embedded | None:
    """Start an embedded worker on ``config``, unless this web process must not
    run one; then say why in one line and return ``None``.

    ``options`` are the application's settings: a ``concurrency`` there wins
    over the embedded worker's default of two threads.
    """
    if env.disabled():
        config.logger.info("WURK_DISABLED=1: this web process enqueues jobs but runs none (no embedded worker)")
        return None
    server = preforking_server()
    if server is not None:
        config.logger.warning(
            "not starting the embedded worker: this process is a %s worker, and each of a preforking server's "
            "workers would run its own; run `wurk` as a process of its own and set WURK_DISABLED=1 on the web role",
            server,
        )
        return None
    concurrency = (options or {}).get("concurrency")

    def configure(embedded: Config) -> None:
        if concurrency is not None:
            embedded.concurrency = int(concurrency)

    instance = configure_embed(configure, config=config)
    instance.run()
    return instance
