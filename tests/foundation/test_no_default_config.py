"""Nothing on a worker's path reaches for the process default configuration.

A worker runs on the configuration it was given; code it runs (processor,
middleware, components, plugin hooks, the jobs Wurk ships) asks
``wurk.current_config()`` or uses the configuration handed to it, never
``wurk.default_config()``, which may point at another Redis (embedded mode,
tests, two applications in one process). Only the process entry points,
which choose the configuration a worker or a client runs on, may name it.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: The distributions checked, by source folder. wurk-limiter is checked once
#: its own fallbacks are replaced (they predate this rule).
CHECKED = [
    "packages/wurk-core/src/wurk",
    "packages/wurk-batches/src/wurk_batches",
    "packages/wurk-cron/src/wurk_cron",
    "packages/wurk-unique/src/wurk_unique",
    "packages/wurk-crypto/src/wurk_crypto",
    "packages/wurk-web/src/wurk_web",
    "packages/wurk-swarm/src/wurk_swarm",
    "packages/wurk-limiter/src/wurk_limiter",
]

#: The modules allowed to name the process default, and why.
ENTRY_POINTS = {
    # Where it is defined, with ``current_config``'s fallback outside any
    # worker and the configure decorators run at the application's import.
    "packages/wurk-core/src/wurk/config/defaults.py",
    # The public re-export.
    "packages/wurk-core/src/wurk/__init__.py",
    # Commands that start a worker or read a server: they choose the
    # configuration (the process default, as documented for ``wurk``).
    "packages/wurk-core/src/wurk/cli/main.py",
    "packages/wurk-swarm/src/wurk_swarm/cli.py",
    "packages/wurk-web/src/wurk_web/cli.py",
    "packages/wurk-core/src/wurk/cli/demo.py",
    # ``configure_embed()`` without a configuration embeds the default one.
    "packages/wurk-core/src/wurk/server/embedded.py",
    # The dashboard application built without a configuration (a web process).
    "packages/wurk-web/src/wurk_web/app.py",
    # Django's start-up configures the process default from settings.WURK, and
    # ``manage.py wurk`` runs the worker on it, as ``wurk`` does.
    "packages/wurk-core/src/wurk/contrib/django/apps.py",
    "packages/wurk-core/src/wurk/contrib/django/management/commands/wurk.py",
}


def mentions(tree: ast.AST) -> list[int]:
    """Lines that call, import or reach ``default_config`` by attribute."""
    lines = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            names = [node.id]
        elif isinstance(node, ast.Attribute):
            names = [node.attr]
        elif isinstance(node, ast.ImportFrom):
            names = [alias.name for alias in node.names]
        else:
            continue
        if "default_config" in names:
            lines.add(node.lineno)
    return sorted(lines)


def test_no_worker_path_names_the_process_default_config():
    offenders = []
    checked = 0
    for folder in CHECKED:
        for path in sorted((ROOT / folder).rglob("*.py")):
            relative = path.relative_to(ROOT).as_posix()
            checked += 1
            if relative in ENTRY_POINTS:
                continue
            offenders += [f"{relative}:{line}" for line in mentions(ast.parse(path.read_text(), relative))]
    assert checked > 100  # the folders above were found and read
    assert offenders == [], "use the configuration you were given, or wurk.current_config(): " + ", ".join(offenders)


def test_the_check_sees_each_spelling():
    source = (
        "import wurk\n"
        "from wurk.config.defaults import default_config\n"
        "a = wurk.default_config()\n"
        "b = default_config()\n"
        "c = wurk.current_config()\n"
    )
    assert mentions(ast.parse(source)) == [2, 3, 4]
