"""Jobs as the browser sees them: unwrapped, redacted, times as epoch seconds.

Everything the dashboard sends about a job goes through this module, so two
promises are kept in one place:

* an encrypted argument is never sent, not even as ciphertext: any value
  shaped like the encryption envelope (a mapping with ``"__wurk_enc__":
  true``) is replaced by :data:`REDACTED`, wherever it sits in the payload,
  and so is the last argument of a job marked ``encrypt``;
* wrapper jobs (Active Job, Django tasks) are shown as the job they carry,
  through the data API's ``display_class`` and ``display_args``.

Times are epoch seconds (floats) so that the browser shows them in the
viewer's own time zone. The sentences an action answers with (``"message"``,
shown on the page once the action is done) count their jobs with
:func:`counted`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from wurk.api import JobRecord, SortedEntry
from wurk.client.payload import ENCRYPTED_PLACEHOLDER, is_encrypted

#: What is shown instead of an encrypted value: the data API's own mask, so
#: the dashboard and every other display say the same.
REDACTED = ENCRYPTED_PLACEHOLDER
#: Payload fields shown decoded or not at all in a job's detail.
HIDDEN_FIELDS = frozenset({"error_backtrace"})


def redact(value: Any) -> Any:
    """``value`` with every encryption envelope inside it replaced by :data:`REDACTED`."""
    if isinstance(value, dict):
        if is_encrypted(value):
            return REDACTED
        return {key: redact(inner) for key, inner in value.items()}
    if isinstance(value, list):
        return [redact(inner) for inner in value]
    return value


def epoch(at: datetime | None) -> float | None:
    return None if at is None else at.timestamp()


def job_summary(record: JobRecord) -> dict[str, Any]:
    """The fields a list row shows."""
    return {
        "jid": record.jid if isinstance(record.jid, str) else None,
        "class": record.display_class,
        "wire_class": record.klass,
        "queue": record.queue,
        "args": redact(record.display_args),
        "tags": redact(record.tags),
        "bid": record.bid if isinstance(record.bid, str) else None,
        "created_at": epoch(record.created_at),
        "enqueued_at": epoch(record.enqueued_at),
        "error_class": _text(record.error_class),
        "error_message": _text(record.error_message),
        "retry_count": record.retry_count if isinstance(record.retry_count, int) else None,
        "valid": record.valid,
    }


def entry_summary(entry: SortedEntry) -> dict[str, Any]:
    """A sorted-set row: the job plus its id (``score|jid``) and its time."""
    return {**job_summary(entry), "id": entry.id, "at": entry.score}


def job_detail(record: JobRecord) -> dict[str, Any]:
    """Everything about one job: the summary, the decoded backtrace and the
    payload's other fields, redacted."""
    item = {key: value for key, value in record.item.items() if key not in HIDDEN_FIELDS}
    if item.get("encrypt") and isinstance(item.get("args"), list) and item["args"]:
        item["args"] = [*item["args"][:-1], REDACTED]
    return {
        **job_summary(record),
        "failed_at": epoch(record.failed_at),
        "retried_at": epoch(record.retried_at),
        "backtrace": record.error_backtrace,
        "payload": redact(item),
    }


def counted(number: int, noun: str, nouns: str | None = None) -> str:
    """``1 job``, ``3 jobs``: a count as the dashboard's messages write it
    (``nouns`` when the plural is not ``noun`` plus "s")."""
    return f"{number} {noun}" if number == 1 else f"{number} {nouns or noun + 's'}"


def _text(value: Any) -> str | None:
    return None if value is None else str(value)
