"""``manage.py wurk``: the ``wurk`` command with the Django project loaded.

Every flag and subcommand of ``wurk`` works the same (``manage.py wurk -q
critical,2 -q default -c 10``, ``manage.py wurk stats``, and ``manage.py wurk
swarm`` when wurk-swarm is installed), since this is the same click group,
built by :func:`wurk.cli.main.build`; Django's own argument parser is left
out so the flags are not parsed twice, differently.
"""

from __future__ import annotations

import os
from typing import Any

from django.core.management.base import BaseCommand

from wurk.cli.main import run_group
from wurk.config.defaults import default_config
from wurk.contrib.django.setup import configure_worker


def run(args: list[str], prog: str) -> None:
    """Run the ``wurk`` group on ``args`` as ``prog``; exits like ``wurk``."""
    config = default_config()
    configure_worker(config)
    run_group(config, args, prog)


class Command(BaseCommand):
    help = "Run a Wurk worker (or any wurk subcommand) with this project loaded."

    def run_from_argv(self, argv: list[str]) -> None:
        run(argv[2:], f"{os.path.basename(argv[0])} {argv[1]}")

    def print_help(self, prog_name: str, subcommand: str) -> None:
        try:
            run(["--help"], f"{os.path.basename(prog_name)} {subcommand}")
        except SystemExit:
            pass

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("args", nargs="*", help="a wurk subcommand and its arguments")

    def handle(self, *args: Any, **options: Any) -> None:
        run(list(args), "wurk")
