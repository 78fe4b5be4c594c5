"""The feature plugins' pages in a real browser: Batches, Limiters and Cron, and
the Scheduled page's whole-set add to queue, clicked through in Debian's
Chromium against a live dashboard on real data. Screenshots go to
``test-artifacts/dashboard/``. Marked ``browser``."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest

import wurk
import wurk_cron
import wurk_web
from tests.batches.jobs import Done, Row
from tests.web.browser.test_pages import ARTIFACTS, XSS, browser, ready, shot
from tests.web.live import serving
from wurk.api import RetrySet, ScheduledSet
from wurk.redis import keys
from wurk_batches import Batch
from wurk_batches.books import Books
from wurk_cron import Manager
from wurk_limiter import Limiter

pytestmark = pytest.mark.browser
__all__ = ["browser"]  # the module's browser fixture, shared


def seed_batches(config: wurk.Config, redis) -> tuple[str, str]:
    """A parent batch with a child whose second job is failing; (parent, child) bids."""
    parent = Batch()
    parent.description = f"Nightly import {XSS}"
    with parent.jobs():
        Row.perform_async(0)
        child = Batch()
        child.description = "Shard 1"
        child.on("success", Done, {"account": 7})
        with child.jobs():
            jids = [Row.perform_async(n) for n in range(4)]
    raw = next(raw for raw in redis.lrange("queue:default", 0, -1) if json.loads(raw)["jid"] == jids[1])
    failing = {**json.loads(raw), "error_class": "ValueError", "error_message": "row 1 is bad", "retry_count": 0}
    RetrySet().schedule(time.time() + 60, failing)
    books = Books.of(config)
    books.ack_failure(child.bid, jids[1])
    books.ack_success(child.bid, jids[0])
    return parent.bid, child.bid


def seed_limiters() -> None:
    window = Limiter.window("partner-api", 3, 3600)
    for _ in range(3):
        window.within_limit(lambda: None)
    seats = Limiter.concurrent("legacy-db", 5)
    seats.within_limit(lambda: None)
    Limiter.leaky("twilio", 100, "minute").status()  # read once: registered, so listed


def seed_cron(config: wurk.Config) -> str:
    manager = Manager(config)
    manager.register("0 4 * * *", "app.jobs.Nightly", queue="low", args=["nightly"], tz="Europe/Berlin")
    return manager.register("*/5 * * * *", f"app.jobs.{XSS}").lid


@pytest.fixture
def site(config, redis, browser) -> Iterator[tuple[object, str, dict]]:
    parent, child = seed_batches(config, redis)
    seed_limiters()
    lid = seed_cron(config)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with serving(wurk_web.create_app(config, poll_seconds=0.2)) as url:
        context = browser.new_context(timezone_id="America/New_York", viewport={"width": 1280, "height": 900})  # type: ignore[attr-defined]
        page = context.new_page()
        page.on("dialog", lambda dialog: dialog.accept())
        errors: list[str] = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        yield page, url, {"parent": parent, "child": child, "lid": lid}
        context.close()
        assert not errors, errors


def test_batches_list_detail_and_family(site, redis):
    page, url, made = site
    ready(page, "/batches", url)
    assert page.locator("nav a", has_text="Batches").count() == 1
    assert XSS in page.inner_text("main")  # the description, as text
    assert page.evaluate("() => window.__pwned") is None
    assert page.locator("progress").count() == 2
    shot(page, "batches")
    page.get_by_role("link", name=made["child"]).click()
    page.wait_for_selector("text=Failing jobs")
    main = page.inner_text("main")
    assert "ValueError: row 1 is bad" in main
    assert "tests.batches.jobs.Done" in main
    assert page.locator(".card", has_text="Pending").locator("dd").inner_text() == "3"
    shot(page, "batch-detail")
    page.get_by_role("link", name=made["parent"]).click()
    page.wait_for_selector("text=Children (1, 1 not finished)")
    assert "Shard 1" in page.get_by_role("table", name="Children (1, 1 not finished)").inner_text()
    ready(page, "/batches", url)
    page.get_by_role("button", name="Dead (0)").click()
    page.wait_for_selector("td.empty")
    assert redis.zcard("batches") == 2


def test_limiters_usage_and_reset(site, redis):
    page, url, _made = site
    ready(page, "/limiters", url)
    assert page.get_by_text("3 limiters registered").count() == 1
    row = page.get_by_role("row", name="partner-api")
    assert "exhausted" in row.inner_text()
    assert "immediate 1" in page.get_by_role("row", name="legacy-db").inner_text()
    shot(page, "limiters")
    row.get_by_role("button", name="Reset").click()
    page.wait_for_function(
        "() => [...document.querySelectorAll('tr')].some("
        "(r) => r.innerText.includes('partner-api') && r.innerText.includes('available'))"
    )
    assert redis.exists("lmtr-w:partner-api") == 0
    assert redis.sismember("lmtr-list", "partner-api")
    page.get_by_role("searchbox", name="Filter by name").fill("twil")
    page.get_by_role("button", name="Filter").click()
    page.wait_for_function("() => document.querySelectorAll('tbody tr').length === 1")
    assert "twilio" in page.inner_text("tbody")
    shot(page, "limiters-filtered")


def test_cron_pause_enqueue_and_history(site, redis):
    page, url, made = site
    ready(page, "/cron", url)
    assert page.get_by_text("2 periodic jobs").count() == 1
    assert f"app.jobs.{XSS}" in page.inner_text("main")
    assert page.evaluate("() => window.__pwned") is None
    shot(page, "cron")
    row = page.get_by_role("row", name="app.jobs.Nightly")
    assert "Europe/Berlin" in row.inner_text()
    row.get_by_role("button", name="Pause").click()
    page.wait_for_selector("text=paused")
    nightly = next(lid.decode() for lid in redis.smembers("periodic") if lid.decode() != made["lid"])
    assert redis.hget(f"loops:{nightly}", "paused") == b"1"
    page.get_by_role("row", name="app.jobs.Nightly").get_by_role("button", name="Unpause").click()
    page.wait_for_function("() => !document.querySelector('main').innerText.includes('paused')")
    assert redis.hget(f"loops:{nightly}", "paused") == b"0"
    page.get_by_role("row", name="app.jobs.Nightly").get_by_role("button", name="Enqueue now").click()
    page.wait_for_selector("text=Enqueued app.jobs.Nightly")
    (raw,) = redis.lrange("queue:low", 0, -1)
    assert json.loads(raw)["args"] == ["nightly"]
    jid = wurk_cron.fire(nightly)
    page.get_by_role("link", name="app.jobs.Nightly").click()
    page.wait_for_selector("text=Last fires")
    assert jid in page.inner_text("main")
    shot(page, "cron-loop")


def test_scheduled_add_all_to_queue(site, redis):
    page, url, _made = site
    for n in range(3):
        job = {"class": "app.jobs.Later", "args": [n], "jid": f"later{n}", "queue": "low"}
        ScheduledSet().schedule(time.time() + 3600 + n, job)
    ready(page, "/scheduled", url)
    page.get_by_role("button", name="Add to queue all").click()
    page.wait_for_selector("td.empty")
    assert redis.zcard(keys.SCHEDULE) == 0
    assert redis.llen(keys.queue("low")) == 3


def test_read_only_hides_the_feature_controls(config, redis, browser):
    seed_batches(config, redis)
    seed_limiters()
    seed_cron(config)
    with serving(wurk_web.create_app(config, read_only=True)) as url:
        context = browser.new_context()  # type: ignore[attr-defined]
        page = context.new_page()
        for path in ("/limiters", "/cron", "/batches"):
            ready(page, path, url)
            assert page.locator("main tbody tr").count() > 0, path
            assert page.locator("main [data-change]").count() == 0, path
        shot(page, "read-only-batches")
        context.close()
