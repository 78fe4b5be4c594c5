"""Every ```python block in docs/ runs, against the real test server.

The blocks of one page run in order as one importable module (so jobs defined
in a page have a real dotted name), with the process default configuration
pointed at the test server and REDIS_URL set. Blocks fenced as ```py are
illustrations and do not run. A page's first example is written as named
files (```python file=app.py, see tests/test_guide_examples.py, which runs
them with real workers); they are written beside the page's module, so a
snippet may import from them as the reader's own code would.
"""

from __future__ import annotations

import importlib
import os
import re
import sys

import pytest

from tests.helpers import ROOT
from tests.test_guide_examples import example_files

DOCS = sorted((ROOT / "docs").glob("*.md"))
BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)


def python_blocks(page):
    return BLOCK.findall(page.read_text(encoding="utf-8"))


@pytest.mark.parametrize("page", [p for p in DOCS if python_blocks(p)], ids=lambda p: p.name)
def test_doc_examples_run(page, config, tmp_path, monkeypatch):
    monkeypatch.setenv("REDIS_URL", config.redis["url"])
    module_name = "doc_" + re.sub(r"\W", "_", page.stem)
    source = "\n\n".join(python_blocks(page))
    for name, content in example_files(page.read_text(encoding="utf-8")).items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(content, encoding="utf-8")
    (tmp_path / f"{module_name}.py").write_text(source, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    environment = dict(os.environ)  # a page may stand in for a deployment's variables (encryption keys)
    try:
        importlib.import_module(module_name)
    finally:
        os.environ.clear()
        os.environ.update(environment)
        for name, module in list(sys.modules.items()):
            if name == module_name or str(getattr(module, "__file__", "") or "").startswith(str(tmp_path)):
                del sys.modules[name]


def test_every_doc_page_is_linked_from_the_index():
    index = (ROOT / "docs" / "index.md").read_text(encoding="utf-8")
    for page in DOCS:
        if page.name != "index.md":
            assert f"({page.name})" in index, f"docs/index.md does not link {page.name}"
