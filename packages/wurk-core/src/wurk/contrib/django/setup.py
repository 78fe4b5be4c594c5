"""The Django app's start-up: ``settings.WURK`` into a configuration, and the hooks.

``settings.WURK`` holds what a YAML config file holds, read by core's own
reader (:func:`wurk.cli.boot.options_from`): the same keys, Sidekiq's
``:key:`` spelling, a section per environment (``APP_ENV``) merged over the
rest. A key that looks like a misspelling of a known one stops the project
with one line, since a typo would otherwise do nothing, silently.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import Any

from django.core.exceptions import ImproperlyConfigured

from wurk.cli import boot
from wurk.client.transactional import transactional_push
from wurk.config import env
from wurk.config.configuration import Config
from wurk.contrib.django import connections, transaction
from wurk.errors import ConfigurationError

SETTING = "WURK"


def is_worker_command(argv: Sequence[str]) -> bool:
    """Whether this process is ``manage.py wurk`` starting a worker or a swarm
    (not an ops subcommand such as ``manage.py wurk stats``)."""
    if len(argv) < 2 or argv[1] != "wurk":
        return False
    words = [word for word in argv[2:] if not word.startswith("-")]
    flags_with_values = {"-c", "--concurrency", "-q", "--queue", "-r", "--require", "-t", "--timeout"}
    flags_with_values |= {"-e", "--environment", "-g", "--tag", "-C", "--config"}
    values = {argv[i + 1] for i in range(2, len(argv) - 1) if argv[i] in flags_with_values}
    commands = [word for word in words if word not in values]
    return not commands or commands[0] == "swarm"


def wurk_options(settings: Any) -> dict[str, Any]:
    """``settings.WURK`` as config-file options, the environment's section merged."""
    data = getattr(settings, SETTING, None) or {}
    if not isinstance(data, Mapping):
        raise ImproperlyConfigured(f"settings.{SETTING} must be a dict of Wurk options, got {type(data).__name__}")
    return boot.options_from(data, env.environment(None))


def configure(config: Config, settings: Any) -> None:
    """Apply ``settings.WURK`` to ``config`` and install the hooks every
    process needs: the fork hook and the push deferred to the commit. The
    worker's own (:func:`configure_worker`) are installed by ``manage.py wurk``."""
    options = wurk_options(settings)
    options.pop("environment", None)  # chosen by APP_ENV, as for a config file
    try:
        boot.refuse_misspelt(config, options, f"settings.{SETTING}")
        boot.apply_options(config, options)
    except ConfigurationError as exc:
        raise ImproperlyConfigured(str(exc)) from None
    config.on("fork", connections.drop_inherited)
    transactional_push(config, transaction.defer)


def configure_worker(config: Config) -> None:
    """What only a worker needs: fresh database connections around each job
    (outermost, so the retry layer's own writes see them too), and the
    installed apps' packages as the ones a payload's class may be imported from."""
    config.server_middleware.prepend(connections.DatabaseConnections)
    from django.apps import apps

    own = [app.name for app in apps.get_app_configs() if not app.name.startswith(("django.", "wurk."))]
    # The django.tasks wrapper, imported when its first job comes (the
    # backend's framework may not be installed where no task is used).
    config.jobs.allow("wurk.contrib.django.backend", *own)


def mark_worker(config: Config, argv: Sequence[str] | None = None) -> None:
    """Enter server mode early when this process is ``manage.py wurk``: the
    app is loaded before the command runs, and ``@wurk.configure_server``
    functions in the project's modules must see a worker."""
    if is_worker_command(sys.argv if argv is None else argv):
        from wurk.config.defaults import enter_server_mode

        enter_server_mode(config)
