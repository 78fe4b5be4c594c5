"""``wurk web``: serve the dashboard on its own."""

from __future__ import annotations

import click

from wurk.errors import ConfigurationError

#: The port ``wurk web`` listens on unless told otherwise.
DEFAULT_PORT = 9494

#: The names a browser uses for a loopback address: on one, ``wurk web``
#: serves only these hosts (and any ``--allowed-host``), so a page whose
#: name was re-pointed at 127.0.0.1 (DNS rebinding) is refused.
LOOPBACK = ("127.0.0.1", "localhost", "::1")


@click.command("web")
@click.option(
    "--host", default="127.0.0.1", show_default=True, help="Address to listen on (0.0.0.0 for every interface)."
)
@click.option(
    "--port", type=click.IntRange(0, 65535), default=DEFAULT_PORT, show_default=True, help="Port to listen on."
)
@click.option("--read-only", is_flag=True, default=None, help="Refuse every change (also WURK_WEB_READ_ONLY=1).")
@click.option(
    "--allowed-host",
    "allowed_hosts",
    multiple=True,
    help="A host name browsers use for the dashboard (repeatable); on a loopback --host, "
    "localhost and 127.0.0.1 are allowed and every other name is refused.",
)
@click.pass_context
def web_command(
    ctx: click.Context, host: str, port: int, read_only: bool | None, allowed_hosts: tuple[str, ...]
) -> None:
    """Serve the dashboard (queues, retries, dead jobs, processes, metrics).

    It reads the Redis that REDIS_URL names, like every other command, and
    binds 127.0.0.1 unless --host says otherwise: put it behind your own
    authentication before opening it to a network. On a loopback address it
    answers only requests for localhost, 127.0.0.1 and [::1] (and each
    --allowed-host), so a web page cannot reach it by re-pointing its own
    name at this machine. While Redis cannot be
    reached its pages answer 503 saying so, and they work again once it answers.
    With shards configured (WURK_SHARDS, or 'shards' in the config file),
    /shard/NAME/ is the dashboard of shard NAME, and every page links to the others.
    """
    import uvicorn

    from wurk.cli import boot
    from wurk.config.defaults import default_config
    from wurk_web import outage
    from wurk_web.app import create_app
    from wurk_web.pool import redis_pool

    root = ctx.find_root()
    obj = root.obj or {}
    config = obj.get("config") or default_config()
    if not config.shards:  # WURK_SHARDS unset: the config file's, for the shard selector
        boot.adopt_file_shards(config, root.params.get("config_file"), root.params.get("environment"))
    hosts = [*LOOPBACK, *allowed_hosts] if host.strip("[]") in LOOPBACK else list(allowed_hosts)
    app = create_app(config, read_only=read_only or None, allowed_hosts=hosts)
    pool = redis_pool(config)  # a bad URL is refused here, in one line
    try:
        pool.execute(lambda conn: conn.ping())  # a database the server does not have is refused too
    except ConfigurationError:
        raise
    except outage.FAILURES as exc:  # Redis not there yet: say so now, and serve 503s until it is
        outage.report(config, exc)
    if host.strip("[]") not in LOOPBACK:
        click.echo(
            f"warning: the dashboard has no login of its own, and anyone who reaches {host}:{port} can read "
            "every job and change any of them: serve it behind a proxy that authenticates, or mount it in "
            "your application behind its login (docs/security.md)",
            err=True,
        )
    click.echo(f"dashboard: http://{host}:{port}/ (Ctrl-C stops it)")
    uvicorn.run(app, host=host, port=port, log_level="warning", lifespan="off")
