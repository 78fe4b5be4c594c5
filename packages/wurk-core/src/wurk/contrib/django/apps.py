"""The Django app: ``"wurk.contrib.django"`` in ``INSTALLED_APPS``."""

from __future__ import annotations

from typing import Any

from django.apps import AppConfig

from wurk.config.defaults import default_config


class WurkConfig(AppConfig):
    """Configures the process's Wurk from ``settings.WURK`` when Django starts.

    The app starts nothing: a web process only pushes; ``manage.py wurk``
    runs the worker.
    """

    name = "wurk.contrib.django"
    label = "wurk"
    verbose_name = "Wurk"
    default = True

    def __init__(self, app_name: str, app_module: Any) -> None:
        super().__init__(app_name, app_module)
        from wurk.contrib.django.setup import mark_worker

        # Before the other apps' modules import (when listed first), so their
        # ``configure_server`` functions run in the worker.
        mark_worker(default_config())

    def ready(self) -> None:
        from django.conf import settings

        from wurk.contrib.django.setup import configure

        configure(default_config(), settings)
