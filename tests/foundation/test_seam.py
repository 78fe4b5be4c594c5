"""The plugin seam, read from the source: core holds no feature's knowledge.

A feature reaches core only through hooks and the plugin API surface; core in
turn must not know any feature, or a core without the feature would carry its
rules half-built and a feature could not change them without a core release.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import re
from pathlib import Path

from tests.helpers import ROOT

CORE = ROOT / "packages" / "wurk-core" / "src" / "wurk"

#: The batch feature's own names: its field, its plural, its class, its
#: distribution and its keys. The singular "batch" stays an ordinary word
#: (``PROMOTE_BATCH``, "a batch of counts"), so it is not matched.
BATCH_TERMS = re.compile(r"\bbid\b|\b[Bb]atches\b|\bBatch\b|wurk[-_]batches|\bb-<|\bb-\{")

#: Lines that name the batch field as Sidekiq's wire format does, for every
#: job whether a batch feature is installed or not: the data API's accessor
#: (Sidekiq's ``JobRecord#bid``) and the default of ``logged_job_attributes``
#: (Sidekiq's default). Each is a whole stripped line, so anything more fails.
WIRE_FORMAT_LINES = {
    ("api/record.py", "def bid(self) -> str | None:"),
    ("api/record.py", "# payload's ``bid`` field the same way, for every job."),
    ("api/record.py", 'return self.item.get("bid")'),
    ("config/settings.py", '"logged_job_attributes": ["bid", "tags"],'),
    # The type of every Sidekiq payload field is checked before a job runs,
    # Pro's included, so that a malformed one cannot fail its own booking.
    ("client/fields.py", '"bid": (_is_name, "a non-empty string"),'),
    ("client/fields.py", '"bid": str,'),
    # The payload type names every wire field a Sidekiq job may carry.
    ("types.py", '"bid": str,'),
}


def test_core_names_no_batch_term_beyond_the_wire_format():
    offenders = []
    for path in sorted([*CORE.rglob("*.py"), *CORE.rglob("*.lua")]):
        relative = path.relative_to(CORE).as_posix()
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if BATCH_TERMS.search(line) and (relative, line.strip()) not in WIRE_FORMAT_LINES:
                offenders.append(f"{relative}:{number}: {line.strip()}")
    assert offenders == []


def test_the_guard_catches_a_batch_rule():
    """The pattern must match what a batch rule in core would look like."""
    for line in ('instance.bid = job["bid"]', "bid: str | None = None", "# Batches need it", "wurk_batches.Batch"):
        assert BATCH_TERMS.search(line), line
    assert not BATCH_TERMS.search("PROMOTE_BATCH = 500  # a batch of members")


# -- the plugin API surface -------------------------------------------------------------------

DOCS = ROOT / "docs" / "plugins.md"
PACKAGES = ROOT / "packages"


def surface() -> set[str]:
    """The modules docs/plugins.md lists as the plugin API surface."""
    text = DOCS.read_text(encoding="utf-8")
    section = text.split("## The plugin API surface", 1)[1].split("\n## ", 1)[0]
    return set(re.findall(r"^\| `(wurk(?:\.\w+)*)` \|", section, re.MULTILINE))


def core_imports(path: Path) -> list[tuple[int, str, list[str]]]:
    """Every import of core in ``path``: (line, module, names imported from it)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name, []) for alias in node.names if alias.name.split(".")[0] == "wurk"]
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "wurk":
            found.append((node.lineno, node.module, [alias.name for alias in node.names]))
    return found


def is_submodule(module: object, name: str) -> bool:
    package = getattr(module, "__name__", "")
    return hasattr(module, "__path__") and importlib.util.find_spec(f"{package}.{name}") is not None


def feature_sources() -> list[Path]:
    features = [
        path
        for path in sorted(PACKAGES.glob("wurk-*/src/**/*.py"))
        if path.relative_to(PACKAGES).parts[0] != "wurk-core"
    ]
    return features + sorted((ROOT / "docs" / "examples").glob("*/src/**/*.py"))


def test_the_surface_is_documented_and_each_module_exists():
    modules = surface()
    assert len(modules) > 20
    for module in sorted(modules):
        importlib.import_module(module)


def test_features_import_only_the_plugin_api_surface():
    """Features are released apart from core: they may build only on what
    core documents as stable, and from a module with ``__all__`` only on
    the names in it (a submodule of a listed package counts as the package's)."""
    allowed = surface()
    offenders = []
    assert feature_sources()
    for path in feature_sources():
        for line, module, names in core_imports(path):
            where = f"{path.relative_to(ROOT)}:{line}: {module}"
            if module not in allowed and names and all(f"{module}.{name}" in allowed for name in names):
                continue  # ``from wurk.redis import keys``: the listed submodules themselves
            if module not in allowed:
                offenders.append(where)
                continue
            imported = importlib.import_module(module)
            public = getattr(imported, "__all__", None)
            for name in names:
                if public is not None and name not in public and not is_submodule(imported, name):
                    offenders.append(f"{where}.{name} (not in its __all__)")
                elif public is None and name.startswith("_"):
                    offenders.append(f"{where}.{name}")
    assert offenders == []
