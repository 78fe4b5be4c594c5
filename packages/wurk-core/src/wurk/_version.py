"""The installed version of wurk-core.

Private to core: every distribution carries its own version (from the
``VERSION`` file in its own folder), so a feature plugin reads its own through
``importlib.metadata`` and never this module. The plugin API a plugin is
built for is :data:`wurk.PLUGIN_API`, not core's version.
"""

from __future__ import annotations

from importlib import metadata
from pathlib import Path


def _read() -> str:
    try:
        return metadata.version("wurk-core")
    except metadata.PackageNotFoundError:  # running from a source tree, not installed
        candidate = Path(__file__).resolve().parents[2] / "VERSION"  # packages/wurk-core/VERSION
        if candidate.is_file():
            return candidate.read_text(encoding="utf-8").strip()
        return "0+unknown"


__version__ = _read()
