"""The bounded substring search against a real server, up to a million-entry queue."""

from __future__ import annotations

import json
import time

import pytest

from wurk.api.search import PER_SEARCH, PER_STORE, Search, SearchResult, match_pattern


def job(klass: str, n: int, **extra: object) -> str:
    payload = {"retry": True, "queue": "default", "args": [n], "class": klass, "jid": f"{n:024x}"}
    payload.update(extra)
    return json.dumps(payload, separators=(",", ":"), ensure_ascii=False)


def fill_queue(redis, name: str, count: int, klass: str = "Filler") -> None:
    """``count`` jobs in ``queue:<name>``, 1,000 values per LPUSH, pipelined."""
    redis.sadd("queues", name)
    pipe = redis.pipeline(transaction=False)
    for start in range(0, count, 1000):
        pipe.lpush(f"queue:{name}", *[job(klass, n) for n in range(start, min(start + 1000, count))])
        if start % 100_000 == 0:
            pipe.execute()
    pipe.execute()


def fill_set(redis, key: str, count: int, klass: str = "Filler") -> None:
    pipe = redis.pipeline(transaction=False)
    for start in range(0, count, 1000):
        pipe.zadd(key, {job(klass, n): 1_800_000_000 + n for n in range(start, min(start + 1000, count))})
    pipe.execute()


def test_finds_jobs_in_queues_and_sets_case_insensitively(config, redis):
    redis.sadd("queues", "default", "critical")
    redis.lpush("queue:default", job("OkJob", 1), job("ReportJob", 2))
    redis.lpush("queue:critical", job("ReportJob", 3))
    failure = {"error_class": "NoMethodError", "error_message": "undefined method", "retry_count": 2}
    redis.zadd("retry", {job("ReportJob", 4, **failure): 1796027770.5})
    redis.zadd("schedule", {job("reportjob", 5): 1796031326.25})
    redis.zadd("dead", {job("Other", 6): 1796027800.0})
    search = Search("REPORTjob")
    rows = search.results()
    assert [(row.kind, row.name, row.args) for row in rows] == [
        ("queues", "critical", [3]),
        ("queues", "default", [2]),
        ("retry", "retry", [4]),
        ("scheduled", "schedule", [5]),
    ]
    assert search.truncated is False
    retry = rows[2]
    assert isinstance(retry, SearchResult)
    assert (retry.klass, retry.jid, retry.queue) == ("ReportJob", f"{4:024x}", "default")
    assert (retry.error_class, retry.error_message, retry.retry_count) == ("NoMethodError", "undefined method", 2)
    assert retry.score == 1796027770.5
    assert retry.at.timestamp() == 1796027770.5
    assert rows[0].score is None
    assert rows[0].value == job("ReportJob", 3)  # the stored bytes, for a deletion
    assert rows[0].as_dict()["kind"] == "queues"
    assert [row.kind for row in Search("nomethoderror")] == ["retry"]  # any part of the JSON


def test_kinds_limit_and_empty_queries(config, redis):
    redis.sadd("queues", "default")
    redis.lpush("queue:default", *[job("Hit", n) for n in range(10)])
    redis.zadd("dead", {job("Hit", 99): 1.0})
    assert [row.kind for row in Search("hit", kinds=["dead", "nonsense"])] == ["dead"]
    assert Search("hit", kinds=["nonsense"]).kinds == ("queues", "retry", "scheduled", "dead")
    assert len(Search("hit", limit=3).results()) == 3
    assert Search("hit", limit=0).limit == 1
    assert Search("hit", limit=10_000).limit == 500
    assert Search("").results() == []
    assert Search("no such text").results() == []


def test_glob_characters_and_non_ascii_letters_match_literally(config, redis):
    redis.sadd("queues", "default")
    weird = job("Weird", 1, note="a*b?[c]\\d")
    accented = job("Accent", 2, note="héllo ✓ Straße")
    redis.lpush("queue:default", weird, accented)
    redis.zadd("retry", {weird: 1.0, accented: 2.0, job("Plain", 3, note="axb"): 3.0})
    assert [row.kind for row in Search("A*B?[C]")] == ["queues", "retry"]
    assert [row.klass for row in Search("HÉLLO ✓")] == ["Accent", "Accent"]
    assert [row.klass for row in Search("straße")] == ["Accent", "Accent"]
    assert match_pattern("a*É") == "*[aA]\\**"
    assert match_pattern("x✓") == "*[xX]✓*"


def test_a_million_entry_queue_stops_at_its_bound_and_says_so(config, redis):
    fill_queue(redis, "huge", 1_000_000)
    assert redis.llen("queue:huge") == 1_000_000
    started = time.monotonic()
    newest = Search(f'"args":[{999_999}]')  # pushed last: at the head, read first
    assert [row.jid for row in newest.results()] == [f"{999_999:024x}"]
    assert newest.truncated is True  # the rest of the queue was never examined
    oldest = Search(f'"args":[{0}]')  # at the tail, beyond the bound
    assert oldest.results() == []
    assert oldest.truncated is True
    assert oldest.examined == PER_STORE
    assert time.monotonic() - started < 5  # two searches, each bounded by 5,000 entries


def test_a_search_examines_at_most_twenty_thousand_entries(config, redis):
    for name in ("a", "b", "c", "d", "e"):
        fill_queue(redis, name, PER_STORE + 10)
    search = Search("nothing matches this")
    assert search.results() == []
    assert search.examined == PER_SEARCH
    assert search.truncated is True


def test_a_small_store_is_read_to_the_end_without_truncation(config, redis):
    fill_queue(redis, "small", PER_STORE)
    fill_set(redis, "dead", 3_000)
    search = Search("nothing matches this")
    assert search.results() == []
    assert search.examined == PER_STORE + 3_000
    assert search.truncated is False


@pytest.mark.parametrize("kind", ["retry", "scheduled", "dead"])
def test_a_large_sorted_set_is_scanned_within_its_bound(config, redis, kind):
    key = {"retry": "retry", "scheduled": "schedule", "dead": "dead"}[kind]
    fill_set(redis, key, 50_000)
    search = Search("Filler", kinds=[kind], limit=500)
    assert len(search.results()) == 500  # ZSCAN MATCH hands back candidates only
    nothing = Search("nothing matches this", kinds=[kind])
    assert nothing.results() == []
    assert nothing.truncated is True
    assert nothing.examined == PER_STORE
    last = Search(f'"args":[{49_999}]', kinds=[kind])
    found = last.results()
    assert last.truncated is True
    assert len(found) <= 1  # found only if it happened to be among the entries scanned


def test_an_exhausted_budget_truncates_only_when_entries_are_left(config, redis):
    for name in ("a", "b", "c", "d"):
        fill_queue(redis, name, PER_STORE)  # exactly the per-store bound: each read to its end
    search = Search("nothing matches this")
    assert search.results() == []
    assert search.examined == PER_SEARCH
    assert search.truncated is False  # the sets were never read, but they are empty
    redis.zadd("dead", {job("Late", 1): 1.0})
    again = Search("nothing matches this")
    assert again.results() == []
    assert again.truncated is True
