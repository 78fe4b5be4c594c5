"""Run the soak: ``python bench/soak [--jobs N] [--fault-every S] [--short]`` (see bench/README.md)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # bench/, so that ``soak`` imports as a package

from soak.driver import main

sys.exit(main())
