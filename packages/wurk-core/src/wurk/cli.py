"""The ``wurk`` command line.

``wurk`` is a click group. Core's subcommands live here; plugins add theirs
through the ``wurk_register_commands`` hook, which runs before the command line
is parsed, so ``wurk --help`` lists every installed command.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from wurk._version import __version__
from wurk.config import Config
from wurk.errors import WurkError

CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"]}


def _root(ctx: click.Context, **flags: Any) -> None:
    """Wurk: background jobs for Python on Sidekiq's Redis protocol.

    Without a command, runs a worker: wurk -r app.py -q critical,2 -q default -c 10
    """
    ctx.ensure_object(dict)
    if ctx.invoked_subcommand is None:
        sys.exit(_run_worker(_config(ctx), flags))


def _run_worker(config: Config, flags: dict[str, Any]) -> int:
    import logging

    from wurk import boot
    from wurk.defaults import enter_server_mode
    from wurk.runner import run_foreground

    flags = {
        "concurrency": flags.get("concurrency"),
        "queues": list(flags.get("queues") or ()),
        "require": flags.get("require"),
        "timeout": flags.get("timeout"),
        "environment": flags.get("environment"),
        "tag": flags.get("tag"),
        "config_file": flags.get("config_file"),
        "verbose": flags.get("verbose") or None,
    }
    try:
        options = boot.build_options(flags)
        enter_server_mode(config)
        boot.apply_options(config, options)
        if options.get("verbose"):
            config.logger.setLevel(logging.DEBUG)
        boot.require_app(options["require"])
        boot.validate(config)
    except WurkError as exc:
        click.echo(f"wurk: {exc}", err=True)
        return 2
    return run_foreground(config)


def _queue_flags(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> tuple[str, ...]:
    from wurk.boot import queue_flag

    try:
        return tuple(queue_flag(value) for value in values)
    except WurkError as exc:
        raise click.BadParameter(str(exc)) from None


WORKER_OPTIONS = [
    click.Option(["-c", "--concurrency"], type=int, help="Processor threads (default: RAILS_MAX_THREADS or 5)."),
    click.Option(["-q", "--queue", "queues"], multiple=True, callback=_queue_flags, help="QUEUE[,WEIGHT]; repeatable."),
    click.Option(["-r", "--require"], help="A .py file, a directory, or an importable module to load."),
    click.Option(["-t", "--timeout"], type=int, help="Shutdown timeout in seconds (default 25)."),
    click.Option(["-e", "--environment"], help="Application environment (default APP_ENV or development)."),
    click.Option(["-g", "--tag"], help="Process tag shown in the dashboard."),
    click.Option(["-C", "--config", "config_file"], help="YAML config file (default config/wurk.yml)."),
    click.Option(["-v", "--verbose"], is_flag=True, default=None, help="Log at DEBUG level."),
]


def _config(ctx: click.Context) -> Config:
    obj: dict[str, Any] = ctx.ensure_object(dict)
    config = obj.get("config")
    if config is None:
        from wurk.defaults import default_config

        config = obj["config"] = default_config()
    return config


@click.command("plugins")
@click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")
@click.pass_context
def plugins_command(ctx: click.Context, as_json: bool) -> None:
    """List the discovered plugins, with version and enabled state.

    Switch a plugin off without uninstalling it with
    WURK_DISABLE_PLUGINS=name[,name...].
    """
    infos = _config(ctx).plugins.discovered()
    if as_json:
        rows = [
            {"name": i.name, "distribution": i.distribution, "version": i.version, "enabled": i.enabled} for i in infos
        ]
        click.echo(json.dumps(rows, indent=2))
        return
    if not infos:
        click.echo("no plugins installed")
        return
    table = [("NAME", "DISTRIBUTION", "VERSION", "STATE")]
    table += [(i.name, i.distribution or "-", i.version or "-", "enabled" if i.enabled else "disabled") for i in infos]
    widths = [max(len(row[col]) for row in table) for col in range(4)]
    for row in table:
        click.echo("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())


def _core_commands() -> list[click.Command]:
    from wurk.demo import demo_command
    from wurk.ops import OPS_COMMANDS

    return [plugins_command, demo_command, *OPS_COMMANDS]


def build(config: Config | None = None) -> click.Group:
    """A fresh command group: core's commands plus every plugin's."""
    config = config or Config()
    group = click.Group(
        "wurk",
        callback=click.pass_context(_root),
        params=list(WORKER_OPTIONS),
        invoke_without_command=True,
        context_settings=CONTEXT_SETTINGS,
        help=_root.__doc__,
    )
    click.version_option(__version__, "-V", "--version", prog_name="wurk", message="%(prog)s %(version)s")(group)
    for command in _core_commands():
        group.add_command(command)
    config.plugins.hook.wurk_register_commands(cli=group)
    return group


def main(argv: list[str] | None = None) -> None:
    from wurk.defaults import default_config

    config = default_config()
    try:
        group = build(config)
    except WurkError as exc:
        click.echo(f"wurk: {exc}", err=True)
        sys.exit(2)
    group.main(args=argv, prog_name="wurk", obj={"config": config})


if __name__ == "__main__":  # pragma: no cover
    main()
