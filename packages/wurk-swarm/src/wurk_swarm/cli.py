"""``wurkswarm`` (alias ``sidekiqswarm``) and ``wurk swarm``: the swarm's command line.

The flags are ``wurk``'s own (:data:`wurk.cli.main.WORKER_OPTIONS`) and boot the
same way (:mod:`wurk.cli.boot`): flags over the config file, then the app is
imported, once, in the parent. What differs is what comes after: the parent
does not talk to Redis (each child PINGs it and runs the server checks
itself, so a swarm started before its Redis crash-loops its children rather
than refusing to start), and it forks the topology's children instead of
running a worker.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Any

import click
import redis

from wurk.cli import boot
from wurk.cli.main import CONTEXT_SETTINGS, WORKER_OPTIONS, explain
from wurk.config import env
from wurk.config.configuration import Config
from wurk.config.defaults import default_config, enter_server_mode
from wurk.errors import WurkError
from wurk.server.health import share_port
from wurk_swarm import __version__
from wurk_swarm.supervisor import Supervisor
from wurk_swarm.topology import configured

__all__ = ["main", "run_swarm", "swarm_command"]

HELP = """Run a swarm: one parent loads the app, then forks a worker per process.

The process count is WURK_COUNT (a whole number, or a fraction of the CPUs),
else the CPU count; a topology set in the app (config["topology"]) supersedes
it. TERM/INT stop (drain), TSTP quiets, USR1 restarts every child in turn,
USR2 reopens logs. Example: WURK_COUNT=4 wurkswarm -r app.py -q default -c 5
"""


def run_swarm(config: Config, flags: dict[str, Any]) -> int:
    """Boot the parent from command-line ``flags`` and supervise until stopped."""
    options = boot.build_options(
        {
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
    )
    enter_server_mode(config)
    boot.apply_options(config, options)
    if options.get("verbose"):
        config.logger.setLevel(logging.DEBUG)
    boot.require_app(options["require"])
    boot.serve_shard(config)  # --shard: the children inherit the shard as their main Redis
    # The checks that need no server run here, once; each child runs the rest.
    boot.allow_app_jobs(config)
    _ = config.redis_pool  # builds the pool, connecting nowhere: a bad URL is refused here, once
    config.reset_redis_pools()
    # Every child runs the app's health check on one port: the first to bind
    # serves, and a survivor takes over when it exits.
    share_port(config)
    return Supervisor(config, configured(config)).run()


def _swarm(ctx: click.Context, **flags: Any) -> None:
    obj = ctx.find_root().ensure_object(dict)
    config = obj.get("config") or default_config()
    try:
        code = run_swarm(config, flags)
    except (WurkError, redis.exceptions.RedisError) as exc:
        if env.debug():
            raise
        raise explain(exc, str(config.redis["url"])) from exc
    sys.exit(code)


def swarm_command(name: str = "swarm") -> click.Command:
    """The swarm as a click command: ``wurk swarm`` or the ``wurkswarm`` script."""
    return click.Command(
        name,
        callback=click.pass_context(_swarm),
        params=list(WORKER_OPTIONS),
        context_settings=CONTEXT_SETTINGS,
        help=HELP,
    )


def main(argv: list[str] | None = None) -> None:
    """The ``wurkswarm`` and ``sidekiqswarm`` console scripts."""
    prog = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "wurkswarm"
    if prog.endswith(".py") or prog == "__main__.py" or prog.startswith("python"):
        prog = "wurkswarm"
    command = swarm_command(prog)
    click.version_option(__version__, "-V", "--version", prog_name=prog, message="%(prog)s %(version)s")(command)
    command.main(args=argv, prog_name=prog, obj={"config": default_config()})


if __name__ == "__main__":  # pragma: no cover
    main()
