"""``manage.py wurk``: the ``wurk`` command with the Django project loaded.

Every flag and subcommand of ``wurk`` works the same (``manage.py wurk -q
critical,2 -q default -c 10``, ``manage.py wurk stats``, and ``manage.py wurk
swarm`` when wurk-swarm is installed), since this is the same click group,
built by :func:`wurk.cli.main.build`; Django's own argument parser is left
out so the flags are not parsed twice, differently.

From Python, ``call_command("wurk", ...)`` takes the same words
(``call_command("wurk", "-q", "critical", "-c", "2")``) and the worker's
flags as keyword options, named after the long flag or its value
(``call_command("wurk", queue=["critical"], concurrency=2)``). It returns
when the command ends (a worker when it is stopped), writes what the command
prints to ``stdout=`` when one is given, and raises ``CommandError`` with the
command's exit status when it fails.
"""

from __future__ import annotations

import contextlib
import os
from argparse import Namespace
from collections.abc import Mapping, Sequence
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from wurk.cli.main import WORKER_OPTIONS, run_group
from wurk.config.defaults import default_config
from wurk.contrib.django.setup import configure_worker


def run(args: list[str], prog: str) -> None:
    """Run the ``wurk`` group on ``args`` as ``prog``; exits like ``wurk``."""
    config = default_config()
    configure_worker(config)
    run_group(config, args, prog)


def flags_from(options: Mapping[str, Any]) -> list[str]:
    """The worker's flags that keyword ``options`` of ``call_command`` stand
    for, by their long names: ``queues=["a", "b"]`` is ``--queue a --queue b``,
    ``verbose=True`` is ``--verbose``; an option left at None or False is absent."""
    flags: list[str] = []
    for option in WORKER_OPTIONS:
        value = options.get(str(option.name))
        if value is None or value is False:
            continue
        flag = max(option.opts, key=len)
        if option.is_flag:
            flags.append(flag)
        elif option.multiple:
            for each in [value] if isinstance(value, str | int) else value:
                flags += [flag, str(each)]
        else:
            flags += [flag, str(value)]
    return flags


def command_line(words: Sequence[str], flags: Sequence[str]) -> list[str]:
    """``words`` with ``flags`` given to the command that runs: after the
    subcommand's name when the words begin with one (``swarm`` takes the
    worker's flags too), else to the worker, first."""
    if words and not words[0].startswith("-"):
        return [words[0], *flags, *words[1:]]
    return [*flags, *words]


class _WordsParser(CommandParser):
    """The parser ``call_command`` asks for: its words are all ``wurk``'s, in
    their order, whatever they look like; only the keyword options go
    through Django (as the defaults this parser declares)."""

    def parse_args(self, args: Sequence[str] | None = None, namespace: Any = None) -> Namespace:
        parsed: Namespace = super().parse_args([], namespace)
        parsed.args = [str(word) for word in args or ()]
        return parsed


class Command(BaseCommand):
    help = "Run a Wurk worker (or any wurk subcommand) with this project loaded."

    def run_from_argv(self, argv: list[str]) -> None:
        run(argv[2:], f"{os.path.basename(argv[0])} {argv[1]}")

    def print_help(self, prog_name: str, subcommand: str) -> None:
        try:
            run(["--help"], f"{os.path.basename(prog_name)} {subcommand}")
        except SystemExit:
            pass

    def create_parser(self, prog_name: str, subcommand: str, **kwargs: Any) -> CommandParser:
        parser = super().create_parser(prog_name, subcommand, **kwargs)
        parser.__class__ = _WordsParser
        return parser

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("args", nargs="*", help="a wurk subcommand and its arguments")
        # The worker's flags, for call_command's keyword options: long names
        # only, since -v is Django's --verbosity.
        for option in WORKER_OPTIONS:
            names = [name for name in option.opts if name.startswith("--")]
            parser.add_argument(*names, dest=option.name, default=None, help=option.help)

    def handle(self, *args: Any, **options: Any) -> None:
        argv = command_line([str(word) for word in args], flags_from(options))
        output = options.get("stdout")
        try:
            with contextlib.redirect_stdout(output) if output else contextlib.nullcontext():
                run(argv, "manage.py wurk")
        except SystemExit as exc:
            code = exc.code
            if code is None or code == 0:
                return
            status = code if isinstance(code, int) else 1
            raise CommandError(f"wurk {' '.join(argv)} exited with status {status}", returncode=status) from None
