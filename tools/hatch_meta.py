"""Hatchling metadata hook shared by every Wurk distribution.

The version lives in the root ``VERSION`` file and nowhere else; this hook
stamps it into each distribution's metadata when it is built from the source
tree. Requirements on other Wurk distributions come in two kinds, from the
hook's configuration in each ``pyproject.toml``:

* ``internal``: a feature distribution's requirement on ``wurk-core``, written
  as the *compatible range* of core's plugin API (``>=0.1.0,<0.2`` for 0.1.0,
  ``>=1.4.0,<2`` for 1.4.0), so a fix to one plugin ships without
  re-releasing the others, and a plugin installs beside any later core of the
  same series;
* ``pinned``: the ``wurk`` meta-package's requirements, pinned exactly, since
  the meta-package stands for one tested set.

Each distribution reaches this file through a ``hatch_meta.py`` symlink in
its own folder, which the sdist stores as a plain copy. An sdist has no root
``VERSION`` file, so there the version is read back from the sdist's PKG-INFO,
which this hook wrote in the first place.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hatchling.metadata.plugin.interface import MetadataHookInterface


def _find_version(start: Path) -> str:
    for folder in (start, *start.parents):
        candidate = folder / "VERSION"
        if candidate.is_file():
            return candidate.read_text(encoding="utf-8").strip()
    pkg_info = start / "PKG-INFO"
    if pkg_info.is_file():
        for line in pkg_info.read_text(encoding="utf-8").splitlines():
            if line.startswith("Version:"):
                return line.split(":", 1)[1].strip()
    raise FileNotFoundError(f"no VERSION file above {start}, and no PKG-INFO in it")


def compatible_range(version: str) -> str:
    """The versions whose plugin API is compatible with ``version``.

    Semantic versioning: the next major release may break plugins; before
    1.0, the next minor release may.
    """
    parts = [int(part) for part in version.split(".")[:2]]
    major, minor = parts[0], parts[1] if len(parts) > 1 else 0
    upper = f"{major + 1}" if major > 0 else f"0.{minor + 1}"
    return f">={version},<{upper}"


class CustomMetadataHook(MetadataHookInterface):
    def update(self, metadata: dict[str, Any]) -> None:
        version = _find_version(Path(self.root).resolve())
        metadata["version"] = version
        external = list(self.config.get("dependencies", []))
        ranged = [f"{name}{compatible_range(version)}" for name in self.config.get("internal", [])]
        pinned = [f"{name}=={version}" for name in self.config.get("pinned", [])]
        metadata["dependencies"] = pinned + ranged + external
        extras = self.config.get("optional-dependencies", {})
        if extras:
            metadata["optional-dependencies"] = {
                extra: [req.replace("{version}", version) for req in reqs] for extra, reqs in extras.items()
            }
