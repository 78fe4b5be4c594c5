"""Each page and action in a real browser: Debian's Chromium, headless, driven by
Playwright against a live dashboard on real data. Screenshots go to
``test-artifacts/dashboard/`` (not kept in git). Marked ``browser``."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

import wurk
import wurk_web
from tests.helpers import ROOT
from tests.web.conftest import failed_job, jid_of
from tests.web.live import serving
from wurk.api import DeadSet, RetrySet, ScheduledSet
from wurk.metrics import keys as metric_keys
from wurk.redis import keys
from wurk.server.retry import compress_backtrace

pytestmark = pytest.mark.browser

CHROMIUM = os.environ.get("WURK_CHROMIUM", "/usr/bin/chromium")
ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip
ARTIFACTS = ROOT / "test-artifacts" / "dashboard"
XSS = "<script>window.__pwned = 1</script>"


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"the browser tests need Chromium at {CHROMIUM} (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as driver:
        launched = driver.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield launched
        launched.close()


def seed(config: wurk.Config, redis) -> None:
    """Real data on every page: queues, the three sets, a process with a running job, metrics."""
    client = wurk.Client(config)
    for n in range(3):
        client.push({"class": "app.jobs.Hello", "args": [f"Ada {n}"], "queue": "default"})
    client.push({"class": "app.jobs.Mail", "args": [XSS, {"__wurk_enc__": True, "ct": "c2VjcmV0"}], "queue": "mail"})
    trace = compress_backtrace(["app/jobs.py:10 in charge", "app/billing.py:3 in call"])
    for n in range(3):
        RetrySet().schedule(1_800_000_000.0 + n, failed_job(jid_of(n), error_backtrace=trace))
    DeadSet().schedule(1_800_000_100.0, failed_job("deadjob1", klass="app.jobs.Broken"))
    ScheduledSet().schedule(
        time.time() + 3600, {"class": "app.jobs.Later", "args": [1], "jid": "later1", "queue": "low"}
    )
    identity = "box:42:abc"
    info = {"hostname": "box", "pid": 42, "tag": "app", "started_at": time.time() - 90, "concurrency": 5,
            "queues": ["default", "mail"], "labels": [], "identity": identity}  # fmt: skip
    redis.sadd(keys.PROCESSES, identity)
    redis.hset(identity, mapping={"info": json.dumps(info), "busy": 1, "beat": time.time(), "quiet": "false",
                                  "concurrency": 5, "rss": 4096, "rtt_us": 90})  # fmt: skip
    payload = json.dumps({"class": "app.jobs.Slow", "args": [7], "jid": jid_of(99), "queue": "default"})
    redis.hset(
        keys.process_work(identity),
        "tid-1",
        json.dumps({"queue": "default", "run_at": time.time() - 12, "payload": payload}),
    )
    minute = metric_keys.one_minute(datetime.now(UTC))
    redis.hset(minute, mapping={"app.jobs.Hello|p": 9, "app.jobs.Hello|ms": 450})


@pytest.fixture
def site(config, redis, browser) -> Iterator[tuple[object, str]]:
    seed(config, redis)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with serving(wurk_web.create_app(config, poll_seconds=0.2)) as url:
        context = browser.new_context(timezone_id="America/New_York", viewport={"width": 1280, "height": 900})  # type: ignore[attr-defined]
        page = context.new_page()
        page.on("dialog", lambda dialog: dialog.accept())
        errors: list[str] = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        yield page, url
        context.close()
        assert not errors, errors


def ready(page, path: str, url: str) -> None:
    page.goto(url + path)
    page.wait_for_selector("[data-view][data-ready]")


def shot(page, name: str) -> None:
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def test_dashboard_shows_live_numbers(site, redis):
    page, url = site
    ready(page, "/", url)
    assert page.locator(".card", has_text="Enqueued").locator("dd").inner_text() == "4"
    redis.set(keys.STAT_PROCESSED, 1234)
    page.wait_for_function("() => document.querySelector('.cards').innerText.includes('1,234')")
    page.wait_for_selector(".chart svg polyline")
    shot(page, "dashboard")


def test_queues_pause_and_delete_a_job(site, redis):
    page, url = site
    ready(page, "/queues", url)
    shot(page, "queues")
    page.get_by_role("row", name="mail").get_by_role("button", name="Pause").click()
    page.wait_for_selector("text=paused")
    assert page.get_by_role("status").inner_text() == "Paused mail: workers take nothing from it."
    assert redis.smembers(keys.PAUSED) == {b"mail"}
    page.get_by_role("link", name="mail").click()
    page.wait_for_selector("[data-view] table td.args")
    assert page.locator("main p", has_text="latency").inner_text().startswith("1 job, latency")
    cell = page.locator("td.args").first.inner_text()
    assert XSS in cell  # shown as text
    assert "[encrypted data]" in cell
    assert "c2VjcmV0" not in page.content()
    assert page.evaluate("() => window.__pwned") is None
    shot(page, "queue")
    page.get_by_role("button", name="Delete", exact=True).click()
    page.wait_for_selector("td.empty")
    assert page.get_by_role("status").inner_text() == "Deleted 1 job from mail."
    assert redis.llen(keys.queue("mail")) == 0


def test_retries_detail_and_actions(site, redis):
    page, url = site
    ready(page, "/retries", url)
    shot(page, "retries")
    page.get_by_role("link", name="app.jobs.Charge").first.click()
    page.wait_for_selector("pre.backtrace")
    assert "app/billing.py:3 in call" in page.locator("pre.backtrace").inner_text()
    shot(page, "retry-detail")
    page.get_by_role("button", name="Kill").click()
    page.wait_for_url("**/retries")
    assert redis.zcard(keys.RETRY) == 2
    assert redis.zcard(keys.DEAD) == 2
    page.wait_for_selector("[data-view][data-ready] tbody input[type=checkbox]")
    # What the detail page did is said on the list it went back to, once.
    assert page.get_by_role("status").inner_text() == "Moved 1 job to the dead set."
    page.get_by_role("button", name="Retry selected").click()
    assert page.get_by_role("status").inner_text() == "Nothing is selected: tick the rows to act on first."
    page.locator("tbody input[type=checkbox]").first.check()
    page.get_by_role("button", name="Retry selected").click()
    page.wait_for_function("() => document.querySelectorAll('tbody tr').length === 1")
    page.wait_for_selector("text=Retried 1 job.")
    shot(page, "retries-after-retry")
    assert page.locator("main p:not(.notice)", has_text="job").first.inner_text() == "1 job"  # not "1 jobs"
    assert redis.zcard(keys.RETRY) == 1
    assert redis.llen(keys.queue("default")) == 4
    ready(page, "/retries", url)
    assert page.get_by_role("status").count() == 0  # shown once, not on every visit


def test_dead_filter_and_retry_all(site, redis):
    page, url = site
    ready(page, "/dead", url)
    page.get_by_role("searchbox", name="Filter").fill("broken")
    page.get_by_role("button", name="Filter").click()
    page.wait_for_selector("text=app.jobs.Broken")
    shot(page, "dead")
    page.get_by_role("button", name="Retry all").click()
    page.wait_for_selector("td.empty")
    assert redis.zcard(keys.DEAD) == 0


def test_scheduled_add_to_queue_with_the_keyboard(site, redis):
    page, url = site
    ready(page, "/scheduled", url)
    shot(page, "scheduled")
    box = page.locator("tbody input[type=checkbox]").first
    box.focus()
    page.keyboard.press("Space")
    page.get_by_role("button", name="Add to queue selected").focus()
    page.keyboard.press("Enter")
    page.wait_for_selector("td.empty")
    assert redis.llen(keys.queue("low")) == 1
    assert redis.zcard(keys.SCHEDULE) == 0


def test_busy_quiet_and_times_in_the_viewers_zone(site, redis):
    page, url = site
    ready(page, "/busy", url)
    assert "app.jobs.Slow" in page.inner_text("main")
    started = page.locator("time").first.get_attribute("title") or ""
    assert "Eastern" in started  # the viewer's time zone, not the server's
    shot(page, "busy")
    page.get_by_role("button", name="Quiet").click()
    page.wait_for_timeout(300)
    assert redis.lrange(keys.process_signals("box:42:abc"), 0, -1) == [b"TSTP"]


def test_metrics_search_and_dark_mode(site):
    page, url = site
    ready(page, "/metrics", url)
    page.wait_for_selector("text=app.jobs.Hello")
    shot(page, "metrics")
    page.get_by_role("link", name="app.jobs.Hello").click()
    page.wait_for_selector("text=Duration histogram")
    shot(page, "job-metrics")
    ready(page, "/search?q=ada", url)
    page.wait_for_selector("text=3 found")
    shot(page, "search")
    page.emulate_media(color_scheme="dark")
    page.set_viewport_size({"width": 390, "height": 844})
    ready(page, "/", url)
    background = page.evaluate("() => getComputedStyle(document.body).backgroundColor")
    assert background == "rgb(21, 23, 27)"
    shot(page, "dashboard-dark-phone")


def test_read_only_hides_every_control(config, redis, browser):
    seed(config, redis)
    with serving(wurk_web.create_app(config, read_only=True)) as url:
        context = browser.new_context()  # type: ignore[attr-defined]
        page = context.new_page()
        for path in ("/queues", "/retries", "/dead", "/scheduled", "/busy"):
            ready(page, path, url)
            assert page.locator("main button").count() == page.locator("main button:not([data-change])").count()
            assert page.locator("main input[type=checkbox]").count() == 0, path
            assert page.locator("main [data-change]").count() == 0, path
        shot(page, "read-only-busy")
        context.close()
