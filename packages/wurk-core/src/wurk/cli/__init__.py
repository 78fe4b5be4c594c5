"""The ``wurk`` command line: starting a worker, the ops subcommands and the demo."""

from __future__ import annotations


def plural(count: int, noun: str, nouns: str | None = None) -> str:
    """``"1 job"``, ``"3 jobs"``: a count as people write it, for every command's output.

    ``nouns`` is the plural when it is not ``noun`` plus "s" ("processes").
    """
    return f"{count} {noun}" if count == 1 else f"{count} {nouns or noun + 's'}"
