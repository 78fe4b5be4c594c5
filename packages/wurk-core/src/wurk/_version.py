"""The installed version of Wurk (one version for every distribution)."""

from __future__ import annotations

from importlib import metadata
from pathlib import Path


def _read() -> str:
    try:
        return metadata.version("wurk-core")
    except metadata.PackageNotFoundError:  # running from a source tree
        for folder in Path(__file__).resolve().parents:
            candidate = folder / "VERSION"
            if candidate.is_file():
                return candidate.read_text(encoding="utf-8").strip()
        return "0+unknown"


__version__ = _read()
