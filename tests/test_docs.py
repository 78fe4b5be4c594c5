"""Every ```python block in docs/ runs, against the real test server.

The blocks of one page run in order as one importable module (so jobs defined
in a page have a real dotted name), with the process default configuration
pointed at the test server and REDIS_URL set. Blocks fenced as ```py are
illustrations and do not run.
"""

from __future__ import annotations

import importlib
import re
import sys

import pytest

from tests.helpers import ROOT

DOCS = sorted((ROOT / "docs").glob("*.md"))
BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)


def python_blocks(page):
    return BLOCK.findall(page.read_text(encoding="utf-8"))


@pytest.mark.parametrize("page", [p for p in DOCS if python_blocks(p)], ids=lambda p: p.name)
def test_doc_examples_run(page, config, tmp_path, monkeypatch):
    monkeypatch.setenv("REDIS_URL", config.redis["url"])
    module_name = "doc_" + re.sub(r"\W", "_", page.stem)
    source = "\n\n".join(python_blocks(page))
    (tmp_path / f"{module_name}.py").write_text(source, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    try:
        importlib.import_module(module_name)
    finally:
        sys.modules.pop(module_name, None)


def test_every_doc_page_is_linked_from_the_index():
    index = (ROOT / "docs" / "index.md").read_text(encoding="utf-8")
    for page in DOCS:
        if page.name != "index.md":
            assert f"({page.name})" in index, f"docs/index.md does not link {page.name}"
