"""Markup in every value the dashboard shows, drawn in a real browser.

Arguments, class names, queue names, error messages and classes, tags,
process names, batch descriptions, limiter and cron names all carry a
payload written straight into Redis (as another program or an attacker with
write access could), and every page is opened in Debian's Chromium. The
pages must show the payload as text: no element it describes is created, no
handler attribute appears, nothing it says runs. The content security policy
would stop the script anyway, so the test reads the document, not only
``window.__pwned``. Marked ``browser``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

import wurk
import wurk_web
from tests.web.browser.test_pages import ARGS, CHROMIUM, browser
from tests.web.conftest import failed_job
from tests.web.live import serving
from wurk.api import DeadSet, RetrySet, ScheduledSet
from wurk.metrics import keys as metric_keys
from wurk.redis import keys

pytestmark = pytest.mark.browser
__all__ = ["ARGS", "CHROMIUM", "browser"]

PAYLOAD = '"><img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script><b id=injected>'
#: For names that are also a page's path (no "/", which would end the segment).
NAME = '"><img src=x onerror="window.__pwned=1"><b id=injected>'
#: A name the client would refuse: written to Redis directly.
QUEUE = f"q{NAME}"
KLASS = f"app.jobs.{NAME}"

#: What the document must never contain once a page is drawn.
INJECTED = "[onerror], [onload], img[src='x'], #injected, main script"


def job(jid: str, **extra: object) -> dict:
    return failed_job(
        jid,
        klass=KLASS,
        args=[PAYLOAD, {"nested": PAYLOAD}],
        error_message=PAYLOAD,
        error_class=PAYLOAD,
        tags=[PAYLOAD],
        queue=QUEUE,
        **extra,
    )


def seed(config: wurk.Config, redis) -> dict[str, str]:
    from wurk_batches import Batch
    from wurk_cron import Manager
    from wurk_limiter import Limiter

    redis.sadd(keys.QUEUES, QUEUE)
    redis.lpush(keys.queue(QUEUE), json.dumps(job("queued1")))
    RetrySet().schedule(1_800_000_000.0, job("retry1"))
    DeadSet().schedule(1_800_000_100.0, job("dead1"))
    ScheduledSet().schedule(time.time() + 3600, job("later1"))
    identity = f"box{PAYLOAD}:42:abc"
    info = {"hostname": f"box{PAYLOAD}", "pid": 42, "tag": PAYLOAD, "started_at": time.time() - 90,
            "concurrency": 5, "queues": [QUEUE], "labels": [PAYLOAD], "identity": identity}  # fmt: skip
    redis.sadd(keys.PROCESSES, identity)
    redis.hset(identity, mapping={"info": json.dumps(info), "busy": 1, "beat": time.time(), "quiet": "false"})
    payload = json.dumps(job("busy1"))
    redis.hset(
        keys.process_work(identity), "tid-1", json.dumps({"queue": QUEUE, "run_at": time.time(), "payload": payload})
    )
    redis.hset(metric_keys.one_minute(datetime.now(UTC)), mapping={f"{KLASS}|p": 9, f"{KLASS}|ms": 450})
    batch = Batch()
    batch.description = PAYLOAD
    with batch.jobs():
        wurk.Client(config).push({"class": "app.jobs.Row", "args": [PAYLOAD], "queue": "default"})
    # The limiter client refuses such a name; the dashboard lists what the
    # registry holds, so it is written there directly.
    Limiter.window("partner-api", 3, 3600).within_limit(lambda: None)
    limiter = f"partner{PAYLOAD}"
    redis.sadd("lmtr-list", limiter)
    redis.hset(f"lmtr:{limiter}", mapping={"type": PAYLOAD, "options": json.dumps({"size": PAYLOAD})})
    lid = Manager(config).register("*/5 * * * *", KLASS, args=[PAYLOAD]).lid
    return {"bid": batch.bid, "lid": lid}


@pytest.fixture
def site(config, redis, browser) -> Iterator[tuple[object, str, dict[str, str], list[str]]]:
    ids = seed(config, redis)
    with serving(wurk_web.create_app(config, poll_seconds=0.2)) as url:
        context = browser.new_context()  # type: ignore[attr-defined]
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        yield page, url, ids, errors
        context.close()


def test_no_value_becomes_markup_on_any_page(site, web):
    page, url, ids, errors = site
    from urllib.parse import quote

    entries = {
        kind: web.get(f"/api/sets/{kind}").json()["entries"][0]["id"] for kind in ("retries", "dead", "scheduled")
    }
    paths = [
        "/", "/busy", "/queues", f"/queues/{quote(QUEUE, safe='')}", "/retries", "/dead", "/scheduled",
        "/metrics", f"/metrics/{quote(KLASS, safe='')}", f"/search?q={quote('onerror')}",
        "/batches", f"/batches/{ids['bid']}", "/limiters", "/cron", f"/cron/{ids['lid']}",
        *(f"/{kind}/entry?id={quote(entry)}" for kind, entry in entries.items()),
    ]  # fmt: skip
    for path in paths:
        page.goto(url + path)
        page.wait_for_selector("[data-view][data-ready]", timeout=10_000, state="attached")
        page.wait_for_timeout(300)  # a live update or two
        shown = page.inner_text("main")
        assert "onerror" in shown or "window.__pwned" in shown or path == "/", path  # drawn, as text
        assert page.locator(INJECTED).count() == 0, path
        assert page.evaluate("() => window.__pwned") is None, path
    assert not errors, errors
