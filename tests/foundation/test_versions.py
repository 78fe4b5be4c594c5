"""Every distribution carries its own version; features reach core only through
its public API, and say which plugin API they were built for.

The hook that writes the versions into the metadata runs here in-process on a
copy of the tree, so the rules are checked without building anything (the
slow builds in test_packaging.py check the real wheels)."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import shutil
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from packaging.version import Version

import wurk
from tests.helpers import ROOT

PACKAGES = ROOT / "packages"
DISTRIBUTIONS = sorted(path.name for path in PACKAGES.iterdir() if (path / "pyproject.toml").is_file())
FEATURES = [name for name in DISTRIBUTIONS if name not in ("wurk", "wurk-core")]


def hatch_meta():
    spec = importlib.util.spec_from_file_location("hatch_meta", ROOT / "tools" / "hatch_meta.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def hook_config(name: str, packages: Path = PACKAGES) -> dict:
    pyproject = tomllib.loads((packages / name / "pyproject.toml").read_text())
    return pyproject["tool"]["hatch"]["metadata"]["hooks"]["custom"]


def stamped(name: str, packages: Path = PACKAGES) -> dict:
    """The metadata the hook writes for ``name``, as a build would."""
    hook = hatch_meta().CustomMetadataHook(str(packages / name), hook_config(name, packages))
    result: dict = {}
    hook.update(result)
    return result


def test_every_distribution_has_its_own_version_file_and_the_root_has_none():
    assert not (ROOT / "VERSION").exists(), "versions live in packages/<dist>/VERSION, one per distribution"
    assert len(FEATURES) == 7
    for name in DISTRIBUTIONS:
        text = (PACKAGES / name / "VERSION").read_text().strip()
        assert str(Version(text)) == text, (name, text)


def test_no_feature_imports_a_private_module_of_core():
    """Features are released apart from core, so they may rely only on what
    core keeps stable: its public names, never ``wurk._version`` or another
    ``wurk._*`` module."""
    offenders = []
    for path in sorted(PACKAGES.glob("wurk-*/**/*.py")):
        if path.relative_to(PACKAGES).parts[0] == "wurk-core" or path.name == "hatch_meta.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                modules = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
            else:
                continue
            for module in modules:
                parts = module.split(".")
                if parts[0] == "wurk" and any(part.startswith("_") for part in parts[1:]):
                    offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}: {module}")
    assert not offenders, offenders


@pytest.mark.parametrize("name", FEATURES)
def test_a_feature_reports_its_own_distributions_version(name):
    package = importlib.import_module(name.replace("-", "_"))
    assert package.__version__ == metadata.version(name)
    on_disk = (PACKAGES / name / "VERSION").read_text().strip()
    assert metadata.version(name) == on_disk, f"stale install: pip install --no-deps -e packages/{name}"


@pytest.mark.parametrize("name", FEATURES)
def test_a_feature_declares_the_plugin_api_it_was_built_for(name):
    plugin = importlib.import_module(f"{name.replace('-', '_')}.plugin")
    declared = plugin.WURK_PLUGIN_API
    assert isinstance(declared, tuple)
    assert declared[0] == wurk.PLUGIN_API[0]
    assert declared[1] <= wurk.PLUGIN_API[1]


def test_the_plugin_api_is_public_and_a_pair_of_integers():
    assert "PLUGIN_API" in wurk.__all__
    assert wurk.PLUGIN_API == wurk.plugins.manager.PLUGIN_API
    assert len(wurk.PLUGIN_API) == 2
    assert all(isinstance(part, int) for part in wurk.PLUGIN_API)


def test_the_meta_package_pins_every_distribution():
    assert sorted(hook_config("wurk")["pinned"]) == sorted(name for name in DISTRIBUTIONS if name != "wurk")
    for name in FEATURES:
        assert hook_config(name)["internal"] == ["wurk-core"], name


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A copy of packages/ and tools/ whose VERSION files a test may change."""
    shutil.copytree(ROOT / "tools", tmp_path / "tools")
    shutil.copytree(PACKAGES, tmp_path / "packages", symlinks=True, ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path / "packages"


def test_versions_move_apart_and_the_hook_follows_each_one(tree):
    (tree / "wurk-core" / "VERSION").write_text("0.3.1\n")
    (tree / "wurk-cron" / "VERSION").write_text("0.1.7\n")
    (tree / "wurk" / "VERSION").write_text("0.4.0\n")

    cron = stamped("wurk-cron", tree)
    assert cron["version"] == "0.1.7"
    assert "wurk-core>=0.3.1,<0.4" in cron["dependencies"]
    assert "croniter>=2" in cron["dependencies"]

    core = stamped("wurk-core", tree)
    assert core["version"] == "0.3.1"
    assert not [req for req in core["dependencies"] if req.startswith("wurk")]

    meta = stamped("wurk", tree)
    assert meta["version"] == "0.4.0"
    pins = sorted(req for req in meta["dependencies"])
    expected = {name: (tree / name / "VERSION").read_text().strip() for name in DISTRIBUTIONS if name != "wurk"}
    assert pins == sorted(f"{name}=={version}" for name, version in expected.items())
    assert "wurk-cron==0.1.7" in pins
    assert "wurk-core==0.3.1" in pins
    assert meta["optional-dependencies"] == {"embedded": ["wurk-core[embedded]==0.3.1"]}


def test_an_sdist_reads_its_siblings_versions_back_from_pkg_info(tmp_path):
    """An unpacked sdist has its own VERSION but no sibling folders."""
    sdist = tmp_path / "wurk_cron-0.1.7"
    sdist.mkdir()
    (sdist / "VERSION").write_text("0.1.7\n")
    (sdist / "PKG-INFO").write_text(
        "Metadata-Version: 2.4\nName: wurk-cron\nVersion: 0.1.7\n"
        "Requires-Dist: croniter>=2\nRequires-Dist: wurk-core<0.4,>=0.3.1\n\nThe description.\n"
    )
    hook = hatch_meta().CustomMetadataHook(str(sdist), hook_config("wurk-cron"))
    result: dict = {}
    hook.update(result)
    assert result["version"] == "0.1.7"
    assert "wurk-core>=0.3.1,<0.4" in result["dependencies"]


def test_a_missing_version_file_fails_the_build(tree):
    (tree / "wurk-cron" / "VERSION").unlink()
    with pytest.raises(FileNotFoundError, match="VERSION"):
        stamped("wurk-cron", tree)


def test_core_imports_no_feature_package():
    """Core knows features only through its hooks: no module of ``wurk``
    imports one, so a feature can be missing, disabled or of any version."""
    features = {name.replace("-", "_") for name in FEATURES}
    offenders = []
    for path in sorted((PACKAGES / "wurk-core" / "src").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                modules = [node.module]
            else:
                continue
            offenders += [
                f"{path.relative_to(ROOT)}:{node.lineno}: {module}"
                for module in modules
                if module.split(".")[0] in features and (path.relative_to(ROOT).as_posix(), module) not in OPTIONAL_USES
            ]
    assert not offenders, offenders


#: Feature imports core's integrations make on the user's request only, each
#: inside a function that says what to install when the feature is missing:
#: the Django view serving the dashboard, reached only from a URLconf that
#: includes ``wurk.contrib.django.urls``.
OPTIONAL_USES = {("packages/wurk-core/src/wurk/contrib/django/views.py", "wurk_web.mount")}
