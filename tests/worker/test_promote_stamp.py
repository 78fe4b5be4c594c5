"""What a promoter changes in a due job: its own top-level ``enqueued_at``, and nothing else.

The reliable promoter's single script (``core.promote``) edits the member's
bytes in place rather than re-encoding it, so every other byte must come out
as it went in: arguments that hold an ``enqueued_at`` of their own, strings
that spell one, key order, number spellings and blanks. Each case is written
as the member and the payload expected on the queue, with ``{STAMP}`` where
the fresh milliseconds go, and is promoted by the script on a real server.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

import wurk
from tests.helpers import ROOT
from wurk.server.scheduled import Enq, ReliableEnq

FIXTURE = ROOT / "tests" / "fixtures" / "sidekiq-8.1.7" / "job-enqueued-by-scheduler.json"
JID = "c0fbec6f2389096dc6818bd6"


class Noted(wurk.Job):
    def perform(self, *args):
        pass


NAME = f"{__name__}.Noted"


class PassThrough(wurk.ClientMiddleware):
    """Any client middleware: it sends the reliable promoter down its chained path."""

    def call(self, job_class, job, queue, redis_pool, call_next):
        return call_next()


class SingleScriptOnly(ReliableEnq):
    def _promote_chained(self, sorted_set):
        raise AssertionError("no middleware and no writer: the single script must promote")


def promote(config: wurk.Config, redis: Any, member: str, sorted_set: str = "retry", queue: str = "q") -> bytes:
    """Promote ``member`` with the single script; the bytes pushed onto ``queue:<queue>``."""
    redis.zadd(sorted_set, {member: time.time() - 1})
    assert SingleScriptOnly(config).enqueue_jobs() == 1
    assert redis.zcard(sorted_set) == 0
    (pushed,) = redis.lrange(f"queue:{queue}", 0, -1)
    return pushed


def assert_stamped(pushed: bytes, expected: str, before_ms: int) -> None:
    """``pushed`` is ``expected`` byte for byte, a fresh stamp in place of every ``{STAMP}``."""
    text = pushed.decode()
    parts = expected.split("{STAMP}")
    assert len(parts) >= 2, "the case names no stamp"
    assert text.startswith(parts[0]), text
    rest = text[len(parts[0]) :]
    for part in parts[1:]:
        digits = len(rest) - len(rest.lstrip("0123456789"))
        assert before_ms <= int(rest[:digits]) <= int(time.time() * 1000), text
        assert rest[digits:].startswith(part), text
        rest = rest[digits + len(part) :]
    assert rest == "", text


def now_ms() -> int:
    return int(time.time() * 1000)


# (member, expected): each a job whose top-level enqueued_at alone may change.
CASES = {
    "an argument holding the key": (
        '{"class":"X","queue":"q","args":[{"enqueued_at":123}],"retry":true,"enqueued_at":1796027746766}',
        '{"class":"X","queue":"q","args":[{"enqueued_at":123}],"retry":true,"enqueued_at":{STAMP}}',
    ),
    "the key nested deeper, before and after the top-level one": (
        '{"args":[{"a":{"enqueued_at":5}},[{"enqueued_at":6.5e3}]],"enqueued_at":1,"queue":"q",'
        '"meta":{"enqueued_at":7,"list":[{"enqueued_at":8}]}}',
        '{"args":[{"a":{"enqueued_at":5}},[{"enqueued_at":6.5e3}]],"enqueued_at":{STAMP},"queue":"q",'
        '"meta":{"enqueued_at":7,"list":[{"enqueued_at":8}]}}',
    ),
    "strings that spell the key": (
        r'{"queue":"q","args":["\"enqueued_at\":1","{\"enqueued_at\":2}","\\","enqueued_at"],'
        r'"error_message":"bad \"enqueued_at\":3 \\\"enqueued_at\":4","enqueued_at":9}',
        r'{"queue":"q","args":["\"enqueued_at\":1","{\"enqueued_at\":2}","\\","enqueued_at"],'
        r'"error_message":"bad \"enqueued_at\":3 \\\"enqueued_at\":4","enqueued_at":{STAMP}}',
    ),
    "keys that end in an escaped quote and the name": (
        r'{"queue":"q","args":[{"say \"enqueued_at":1}],"say \"enqueued_at":2,"enqueued_at":3}',
        r'{"queue":"q","args":[{"say \"enqueued_at":1}],"say \"enqueued_at":2,"enqueued_at":{STAMP}}',
    ),
    "brackets inside strings of an argument": (
        '{"queue":"q","args":["]","{[",{"enqueued_at":1,"s":"}"}],"enqueued_at":2,"x":["[",1]}',
        '{"queue":"q","args":["]","{[",{"enqueued_at":1,"s":"}"}],"enqueued_at":{STAMP},"x":["[",1]}',
    ),
    "an opening bracket inside a string of an argument": (
        '{"queue":"q","args":["[",{"enqueued_at":1}],"enqueued_at":2,"x":[3]}',
        '{"queue":"q","args":["[",{"enqueued_at":1}],"enqueued_at":{STAMP},"x":[3]}',
    ),
    "a string key that ends in the name": (
        '{"queue":"q","args":[],"not_enqueued_at":1,"enqueued_at_x":2,"enqueued_at":3}',
        '{"queue":"q","args":[],"not_enqueued_at":1,"enqueued_at_x":2,"enqueued_at":{STAMP}}',
    ),
    "no top-level key, one in an argument": (
        '{"class":"X","queue":"q","args":[{"enqueued_at":123}],"jid":"j"}',
        '{"class":"X","queue":"q","args":[{"enqueued_at":123}],"jid":"j","enqueued_at":{STAMP}}',
    ),
    "the key first": (
        '{"enqueued_at":1796027746766,"queue":"q","args":[1]}',
        '{"enqueued_at":{STAMP},"queue":"q","args":[1]}',
    ),
    "the key between the others": (
        '{"queue":"q","enqueued_at":1796027746766,"args":[1],"class":"X"}',
        '{"queue":"q","enqueued_at":{STAMP},"args":[1],"class":"X"}',
    ),
    "blanks around the one key": (
        '{"queue":"q", "args":[1.50], "enqueued_at" :\t17 ,"jid":"j"}',
        '{"queue":"q", "args":[1.50], "enqueued_at" :\t{STAMP} ,"jid":"j"}',
    ),
    "the key spelt with an escape, and plainly in an argument": (
        '{"queue":"q","args":[{"enqueued_at":1}],"enqueued\\u005fat":2}',
        '{"queue":"q","args":[{"enqueued_at":1}],"enqueued\\u005fat":{STAMP}}',
    ),
    "number spellings, escapes and blanks another writer used": (
        '{ "queue" : "q" ,\n "args" : [1.0, 1e5, -0.0, 12345678901234567890, "caf\\u00e9", "caf\u00e9"] ,'
        ' "enqueued_at" : 1796027746.766 , "at" : 1.5E+9 }\n',
        '{ "queue" : "q" ,\n "args" : [1.0, 1e5, -0.0, 12345678901234567890, "caf\\u00e9", "caf\u00e9"] ,'
        ' "enqueued_at" : {STAMP} , "at" : 1.5E+9 }\n',
    ),
    "blanks and no top-level key": (
        '{ "queue" : "q" , "args" : [ {"enqueued_at": 1} ] }',
        '{ "queue" : "q" , "args" : [ {"enqueued_at": 1} ] ,"enqueued_at":{STAMP}}',
    ),
    "a value that is not a number": (
        '{"queue":"q","enqueued_at":null,"args":[]}',
        '{"queue":"q","enqueued_at":{STAMP},"args":[]}',
    ),
    "a value that is a string or an object": (
        '{"queue":"q","enqueued_at":"soon","args":[],"enqueued_at":{"enqueued_at":1}}',
        '{"queue":"q","enqueued_at":{STAMP},"args":[],"enqueued_at":{STAMP}}',
    ),
    "the key spelt with an escape": (
        '{"queue":"q","args":[],"enqueued\\u005fat":1}',
        '{"queue":"q","args":[],"enqueued\\u005fat":{STAMP}}',
    ),
    "an object with no member": (
        "{}",
        '{"enqueued_at":{STAMP}}',
    ),
}


@pytest.mark.parametrize(("member", "expected"), list(CASES.values()), ids=list(CASES))
def test_the_single_script_changes_only_the_top_level_enqueued_at(config, redis, member, expected):
    json.loads(member)  # every case is a valid JSON text
    queue = "default" if member == "{}" else "q"
    before = now_ms()
    assert_stamped(promote(config, redis, member, queue=queue), expected, before)


@pytest.mark.parametrize("sorted_set", ["schedule", "retry"])
def test_a_promoted_job_is_what_sidekiqs_scheduler_writes(config, redis, sorted_set):
    """Sidekiq stores a scheduled job without ``enqueued_at`` and its poller
    appends one as the last key: the captured payload, less its stamp, comes
    back byte for byte with a fresh one in the same place."""
    captured = json.loads(FIXTURE.read_text())
    raw = captured["raw"]
    stamp = f',"enqueued_at":{captured["parsed"]["enqueued_at"]}'
    assert raw.endswith(stamp + "}")
    before = now_ms()
    pushed = promote(config, redis, raw.replace(stamp, ""), sorted_set, queue="elsewhere")
    assert_stamped(pushed, raw.replace(stamp, ',"enqueued_at":{STAMP}'), before)
    assert list(json.loads(pushed)) == captured["key_order"]


@pytest.mark.parametrize(
    "member",
    ['["not", "a", "job"]', '"text"', '{"class":"X","args":[', "\xff not json"],
    ids=["array", "string", "truncated", "not-json"],
)
def test_a_member_that_is_not_a_job_object_reaches_the_default_queue_untouched(config, redis, member):
    """No stamp to set: the worker that fetches it reports it, byte for byte as it was."""
    assert promote(config, redis, member, queue="default") == member.encode()


@pytest.mark.parametrize("promoter", ["default", "reliable", "reliable-chained"])
def test_every_promoter_leaves_an_argument_holding_enqueued_at_alone(config, redis, promoter):
    """The Python promoters decode and re-encode the job (their client
    middleware may change it), so only its meaning is kept there: the
    arguments are equal, the top-level stamp alone is fresh."""
    if promoter == "reliable-chained":
        config.client_middleware.add(PassThrough)
    enq = Enq(config) if promoter == "default" else ReliableEnq(config)
    args = [{"enqueued_at": 123}, {"nested": [{"enqueued_at": 4.5}]}, '"enqueued_at":1']
    job = {"class": NAME, "queue": "q", "args": args, "jid": JID, "retry": True, "created_at": 1796027746766}
    job["enqueued_at"] = 1796027746766
    redis.zadd("retry", {json.dumps(job, separators=(",", ":")): time.time() - 1})
    before = now_ms()
    assert enq.enqueue_jobs() == 1
    (pushed,) = [json.loads(item) for item in redis.lrange("queue:q", 0, -1)]
    assert pushed["args"] == args
    assert before <= pushed["enqueued_at"] <= now_ms()
    assert {key: value for key, value in pushed.items() if key != "enqueued_at"} == {
        key: value for key, value in job.items() if key != "enqueued_at"
    }
