"""The least-privilege ACL user of docs/deployment.md, applied to a test server.

The rule is read from the documentation itself (every ``ACL SETUSER wurk``
line of its "A Redis ACL user" section), so that the page and the tests
cannot drift apart: a command the code starts to send and the page does not
grant fails the tests that send it.

With ``WURK_TEST_ACL=1`` the suite's ``redis_url`` fixture hands out the URL
of that user instead of the default one, and fails any test during which the
server denied the user a command (``ACL LOG``). Set-up and assertions keep an
administrator's connection (``FLUSHALL``, ``SCRIPT FLUSH``, ``ACL LOG``).
"""

from __future__ import annotations

import os
import re
import shlex
from typing import Any

import redis as redis_py

from .helpers import ROOT

ACL_ENV = "WURK_TEST_ACL"
DOC = ROOT / "docs" / "deployment.md"
SECTION = "## A Redis ACL user"
USER = "wurk"
#: The user the suite runs as under ``WURK_TEST_ACL=1``: the documented rule
#: plus the keys in which test jobs running inside Wurk's own pools (and the
#: docs' examples, the guide's example plugin among them) leave their
#: evidence, no key of Wurk's own; and one command Wurk never sends, the
#: ``FLUSHDB`` with which the testing guide's example empties its database.
SUITE_USER = "wurk-suite"
_EVIDENCE = """
    executions ran deaths started events runs poisoned performed metrics healed attempts threads died
    test:clock clock-reads:* recoveries overrated finished done calls admitted sql seen reports:last peak hold
    custom crashes around web_child web walking tenants report refused plugin_events parent_bg parent modules
    leadership last-iteration job_pids identities holders held callbacks_done callbacks awaiting async_pids
    async_done sync stuck-once stops_once stop_at starts stamped secret-thing seated outcomes odd long ledger:*
    holding headers gathered failed-once fail_at exhausted custom_parent cmd clock cancel_at bailed acted acl:*
    loops lock:* once:* child:* shared greeting plain called connection-seen fork-probe naps
    audit account:* demo-scores tally:*
"""
SUITE_EVIDENCE_KEYS = _EVIDENCE.split()
SUITE_EVIDENCE_COMMANDS = ["+flushdb"]
#: Distinctive, so that a test grepping output for it finds only a leak.
PASSWORD = "acl-Pa55-7f3c9e1d-secret"


def acl_mode() -> bool:
    return os.environ.get(ACL_ENV, "") not in ("", "0", "false", "no")


def documented_rules() -> list[list[str]]:
    """The arguments of each ``ACL SETUSER wurk`` line in the section, in order."""
    text = DOC.read_text(encoding="utf-8")
    start = text.index(SECTION)
    end = text.find("\n## ", start + len(SECTION))
    section = text[start : end if end != -1 else len(text)]
    rules = [shlex.split(line)[3:] for line in section.splitlines() if line.startswith(f"ACL SETUSER {USER} ")]
    if not rules:
        raise AssertionError(f"{DOC.name}: no 'ACL SETUSER {USER}' line under {SECTION!r}")
    return rules


def create_user(
    admin: redis_py.Redis,
    password: str = PASSWORD,
    *,
    user: str = USER,
    evidence: list[str] | None = None,
    commands: list[str] | None = None,
) -> None:
    """(Re)create the documented user, its password replaced by ``password``;
    ``evidence`` and ``commands``: key patterns and commands test code uses
    besides (see ``SUITE_USER``)."""
    admin.execute_command("ACL", "DELUSER", user)
    for rule in documented_rules():
        rule = [f">{password}" if token.startswith(">") else token for token in rule]
        try:
            admin.execute_command("ACL", "SETUSER", user, *rule)
        except redis_py.ResponseError as exc:
            # The line the page gives for Redis 7.2 and later only.
            if rule != ["+client|setinfo"] or "Unknown command" not in str(exc):
                raise
    if evidence:
        admin.execute_command("ACL", "SETUSER", user, *(f"~{key}" for key in evidence))
    if commands:
        admin.execute_command("ACL", "SETUSER", user, *commands)


def user_url(admin_url: str, password: str = PASSWORD, *, user: str = USER) -> str:
    return re.sub(r"^redis://", f"redis://{user}:{password}@", admin_url)


def denials(admin: redis_py.Redis, user: str = USER) -> list[dict[str, Any]]:
    """What the server refused the user since the last ``ACL LOG RESET``."""
    entries = admin.execute_command("ACL", "LOG", "128")
    found = []
    for entry in entries:
        if isinstance(entry, list):  # RESP2: a flat list of field, value
            entry = dict(zip(entry[::2], entry[1::2], strict=True))
        entry = {_text(key): _text(value) for key, value in entry.items()}
        if entry.get("username") == user:
            found.append({key: entry.get(key) for key in ("reason", "context", "object", "count")})
    return found


def _text(value: Any) -> Any:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value
