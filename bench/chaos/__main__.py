"""Run the chaos driver: ``python bench/chaos [--short] [--peers wurk,rq,...]`` (see bench/README.md)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # bench/, so that ``chaos`` imports as a package

from chaos.driver import main

sys.exit(main())
