"""The plugin seam, read from the source: core holds no feature's knowledge.

A feature reaches core only through hooks and the plugin API surface; core in
turn must not know any feature, or a core without the feature would carry its
rules half-built and a feature could not change them without a core release.
"""

from __future__ import annotations

import re

from tests.helpers import ROOT

CORE = ROOT / "packages" / "wurk-core" / "src" / "wurk"

#: The batch feature's own names: its field, its plural, its class, its
#: distribution and its keys. The singular "batch" stays an ordinary word
#: (``PROMOTE_BATCH``, "a batch of counts"), so it is not matched.
BATCH_TERMS = re.compile(r"\bbid\b|\b[Bb]atches\b|\bBatch\b|wurk[-_]batches|\bb-<|\bb-\{")

#: Lines that name the batch field as Sidekiq's wire format does, for every
#: job whether a batch feature is installed or not: the data API's accessor
#: (Sidekiq's ``JobRecord#bid``) and the default of ``logged_job_attributes``
#: (Sidekiq's default). Each is a whole stripped line, so anything more fails.
WIRE_FORMAT_LINES = {
    ("api/record.py", "def bid(self) -> str | None:"),
    ("api/record.py", "# payload's ``bid`` field the same way, for every job."),
    ("api/record.py", 'return self.item.get("bid")'),
    ("settings.py", '"logged_job_attributes": ["bid", "tags"],'),
}


def test_core_names_no_batch_term_beyond_the_wire_format():
    offenders = []
    for path in sorted([*CORE.rglob("*.py"), *CORE.rglob("*.lua")]):
        relative = path.relative_to(CORE).as_posix()
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if BATCH_TERMS.search(line) and (relative, line.strip()) not in WIRE_FORMAT_LINES:
                offenders.append(f"{relative}:{number}: {line.strip()}")
    assert offenders == []


def test_the_guard_catches_a_batch_rule():
    """The pattern must match what a batch rule in core would look like."""
    for line in ('instance.bid = job["bid"]', "bid: str | None = None", "# Batches need it", "wurk_batches.Batch"):
        assert BATCH_TERMS.search(line), line
    assert not BATCH_TERMS.search("PROMOTE_BATCH = 500  # a batch of members")
