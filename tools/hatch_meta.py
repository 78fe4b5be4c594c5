"""Hatchling metadata hook shared by every Wurk distribution.

The monorepo ships one version for all its distributions. That version lives in
the root ``VERSION`` file and nowhere else; this hook stamps it into each
distribution's metadata when it is built from the source tree, and turns each
``internal`` requirement (another Wurk distribution) into an exact pin, so a
wurk-batches 1.4.0 can never be installed beside a wurk-core 1.3.9.

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


class CustomMetadataHook(MetadataHookInterface):
    def update(self, metadata: dict[str, Any]) -> None:
        version = _find_version(Path(self.root).resolve())
        metadata["version"] = version
        external = list(self.config.get("dependencies", []))
        internal = [f"{name}=={version}" for name in self.config.get("internal", [])]
        metadata["dependencies"] = internal + external
        extras = self.config.get("optional-dependencies", {})
        if extras:
            metadata["optional-dependencies"] = {
                extra: [req.replace("{version}", version) for req in reqs] for extra, reqs in extras.items()
            }
