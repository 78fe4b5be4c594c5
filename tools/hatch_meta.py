"""Hatchling metadata hook shared by every Wurk distribution.

Every distribution is versioned on its own: its version lives in the
``VERSION`` file of its own folder (``packages/<dist>/VERSION``) and nowhere
else, so a fix to one plugin ships without re-releasing the others. This hook
stamps that version into the distribution's metadata when it is built.
Requirements on other Wurk distributions come in two kinds, from the hook's
configuration in each ``pyproject.toml``:

* ``internal``: a feature distribution's requirement on ``wurk-core``, written
  as the *compatible range* of core's current version (``>=0.1.0,<0.2`` for
  0.1.0, ``>=1.4.0,<2`` for 1.4.0). Core's own ``VERSION`` file is the one
  place the range comes from: a plugin is tested against the core beside it in
  the tree, and installs beside any later core of the same series, which keeps
  the plugin API compatible (core's ``PLUGIN_API`` only changes its major
  number in a release that leaves the range);
* ``pinned``: the ``wurk`` meta-package's requirements, each pinned exactly to
  the version in that distribution's folder, since the meta-package stands for
  one tested set.

An extra's requirement may name a sibling's version as ``{wurk-core}``.

Each distribution reaches this file through a ``hatch_meta.py`` symlink in
its own folder, which the sdist stores as a plain copy. An sdist carries its
own ``VERSION`` file but not its siblings' folders, so there the siblings'
versions are read back from the sdist's PKG-INFO, which this hook wrote in the
first place.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from hatchling.metadata.plugin.interface import MetadataHookInterface
from packaging.requirements import Requirement

_PLACEHOLDER = re.compile(r"\{([A-Za-z0-9_.-]+)\}")


def read_version(folder: Path) -> str | None:
    """The version in ``folder/VERSION``, or None when there is no such file."""
    candidate = folder / "VERSION"
    if candidate.is_file():
        return candidate.read_text(encoding="utf-8").strip()
    return None


def _pkg_info(root: Path) -> list[tuple[str, str]]:
    path = root / "PKG-INFO"
    if not path.is_file():
        return []
    fields = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            break  # the description body follows the headers
        key, _, value = line.partition(":")
        fields.append((key.strip(), value.strip()))
    return fields


def versions_from_pkg_info(root: Path) -> dict[str, str]:
    """Versions this hook wrote into an sdist's PKG-INFO, keyed by distribution.

    ``Version`` gives the distribution's own (under the key ``""``); a sibling's
    is the lower bound of a compatible range or the exact pin.
    """
    found: dict[str, str] = {}
    for key, value in _pkg_info(root):
        if key == "Version":
            found[""] = value
        elif key == "Requires-Dist":
            requirement = Requirement(value)
            for spec in requirement.specifier:
                if spec.operator in (">=", "=="):
                    found.setdefault(requirement.name, spec.version)
    return found


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
    def _version_of(self, name: str) -> str:
        """A Wurk distribution's version, from its folder in the source tree.

        ``name`` is ``""`` for the distribution being built.
        """
        root = Path(self.root).resolve()
        folder = root if not name else root.parent / name
        version = read_version(folder) or versions_from_pkg_info(root).get(name)
        if version is None:
            raise FileNotFoundError(f"no VERSION file in {folder}, and no version for {name or 'it'} in PKG-INFO")
        return version

    def update(self, metadata: dict[str, Any]) -> None:
        metadata["version"] = self._version_of("")
        external = list(self.config.get("dependencies", []))
        ranged = [f"{name}{compatible_range(self._version_of(name))}" for name in self.config.get("internal", [])]
        pinned = [f"{name}=={self._version_of(name)}" for name in self.config.get("pinned", [])]
        metadata["dependencies"] = pinned + ranged + external
        extras = self.config.get("optional-dependencies", {})
        if extras:
            metadata["optional-dependencies"] = {
                extra: [_PLACEHOLDER.sub(lambda m: self._version_of(m.group(1)), req) for req in reqs]
                for extra, reqs in extras.items()
            }
