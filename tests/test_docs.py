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


# -- say only what is true ------------------------------------------------------------------
#
# Every feature Wurk's own distributions offer is built; a page that calls one
# "coming" or "not built yet" sends a reader away from something that works.
# A claim about work that truly is ahead goes in ALLOWED, with its file and
# the phrase, so it is looked at again when that work lands.

#: What the scan reads: the README, every page, and what each distribution
#: says of itself (its README and the description in its pyproject.toml).
CLAIMED_IN = sorted(
    {ROOT / "README.md", *DOCS, *(ROOT / "packages").glob("*/README.md"), *(ROOT / "packages").glob("*/pyproject.toml")}
)
NOT_YET = re.compile(
    r"not (yet )?built|not (yet )?(implemented|available)|(implemented|available) yet|coming soon"
    r"|\b(is|are|still) coming\b|\(coming\)|\bcoming[,;:]|\bwill (ship|land)\b|\bonce it (is built|lands)\b"
    r"|\b(is|are|was|were) planned\b|\bplanned (for|as)\b|\bin a future (release|version)\b",
    re.IGNORECASE,
)
#: (file relative to the root, phrase) pairs that are true today.
ALLOWED: set[tuple[str, str]] = set()


def stale_claims(path):
    """``file:line: phrase`` for each "not built yet" kind of phrase in ``path``."""
    relative = path.relative_to(ROOT).as_posix()
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".toml":  # only what the distribution says of itself
        text = "\n".join(line if line.startswith("description") else "" for line in text.splitlines())
    found = []
    for number, line in enumerate(text.splitlines(), start=1):
        for match in NOT_YET.finditer(line):
            if (relative, match.group(0).lower()) not in ALLOWED:
                found.append(f"{relative}:{number}: {match.group(0)!r} in {line.strip()!r}")
    return found


def test_no_page_calls_a_built_feature_coming():
    stale = [claim for path in CLAIMED_IN for claim in stale_claims(path)]
    assert not stale, "stale claims (the feature is built; say what it does):\n" + "\n".join(stale)


def test_the_stale_claim_scan_sees_the_phrases_it_looks_for():
    """The scan itself, on the claims it was written to catch."""
    for claim in (
        "the dashboard is **coming, not built yet**",
        "What is not built yet is listed below.",
        "once the swarm is built — it is coming —",
        "a task from the Django integration (coming) shows",
        "Batches are planned as plugins",
        "Encryption is coming soon.",
    ):
        assert NOT_YET.search(claim), claim
    for true_today in ("a scheduled job coming due", "the status `coming`", "The next fire happens as planned."):
        assert not NOT_YET.search(true_today), true_today


def test_no_page_fails_where_redis_url_is_unset():
    """Wurk itself falls back to redis://localhost:6379/0 without REDIS_URL; a
    page's code that reads it with ``os.environ["REDIS_URL"]`` raises KeyError
    instead, on the machine of a reader who runs ``wurk server``."""
    strict = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in [ROOT / "README.md", *DOCS]
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
        if re.search(r"""environ\[["']REDIS_URL["']\]""", line)
    ]
    assert not strict, f"read REDIS_URL with os.environ.get(..., default) in {strict}"
