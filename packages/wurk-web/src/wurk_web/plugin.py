"""The wurk-web plugin: the dashboard's settings and the ``wurk web`` command.

The dashboard application itself is :func:`wurk_web.create_app`; this module
is what core loads through the ``wurk`` entry point, so it stays light: the
web framework is imported only when ``wurk web`` runs or an app is built.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from wurk.config.settings import whole_number
from wurk.errors import ConfigurationError
from wurk.plugins.hookspecs import hookimpl

if TYPE_CHECKING:
    import click

    from wurk.config.settings import SettingRegistry

#: The plugin API this plugin was built for; core refuses to load it if it
#: provides another major, or an older minor (see ``wurk.PLUGIN_API``).
WURK_PLUGIN_API = (1, 9)  # wurk.via, config.shards: the dashboard of several shards

#: Connections in the dashboard's own Redis pool.
WEB_POOL_SIZE = 5

#: Strings that switch a flag off, as the guides read ``WURK_WEB_READ_ONLY``.
FALSE_STRINGS = frozenset({"", "0", "false", "no", "off"})


def read_only_flag(key: str, value: Any) -> bool | None:
    """``None`` (follow ``WURK_WEB_READ_ONLY``), a bool, or a string read as the
    environment variable is."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str):
        return value.strip().lower() not in FALSE_STRINGS
    raise ConfigurationError(f"{key} must be a bool, a flag string or None, got {value!r}")


@hookimpl
def wurk_register_settings(settings: SettingRegistry) -> None:
    settings.add(
        "web_pool_size",
        default=WEB_POOL_SIZE,
        check=whole_number(1),
        owner="wurk-web",
        doc="Connections in the dashboard's Redis pool (wurk_web.redis_pool(config)).",
    )
    settings.add(
        "web_read_only",
        default=None,
        check=read_only_flag,
        owner="wurk-web",
        doc="Serve the dashboard read-only; None follows WURK_WEB_READ_ONLY.",
    )


@hookimpl
def wurk_register_commands(cli: click.Group) -> None:
    from wurk_web.cli import web_command

    cli.add_command(web_command)
