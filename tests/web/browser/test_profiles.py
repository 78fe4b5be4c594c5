"""The Profiles tab in a real browser (Debian's Chromium, headless): the list,
one profile's top functions, a deletion. Screenshots under
``test-artifacts/dashboard/``. Marked ``browser``."""

from __future__ import annotations

import pstats
from collections.abc import Iterator

import pytest

import wurk_web
from tests.web.browser.test_pages import ARTIFACTS, XSS, browser  # noqa: F401 (the browser fixture)
from tests.web.live import serving
from wurk.server import profiler

pytestmark = pytest.mark.browser


def fibonacci(n: int) -> int:
    return n if n < 2 else fibonacci(n - 1) + fibonacci(n - 2)


def store(config, token: str, jid: str, klass: str) -> None:
    job = {"class": klass, "jid": jid, "profile": token, "args": []}
    profiler.profile_job(config, job, lambda: fibonacci(15))


@pytest.fixture
def site(config, redis, browser) -> Iterator[tuple[object, str]]:  # noqa: F811
    store(config, "alice", "a" * 24, "app.jobs.Crunch")
    store(config, XSS, "b" * 24, XSS)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with serving(wurk_web.create_app(config)) as url:
        context = browser.new_context(timezone_id="America/New_York", viewport={"width": 1280, "height": 900})  # type: ignore[attr-defined]
        page = context.new_page()
        page.on("dialog", lambda dialog: dialog.accept())
        errors: list[str] = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        yield page, url
        context.close()
        assert not errors, errors


def test_the_list_a_profile_and_a_deletion(site, redis):
    page, url = site
    page.goto(url + "/profiles")
    page.wait_for_selector(".profiles[data-ready]")
    assert page.get_by_role("link", name="Profiles").get_attribute("aria-current") == "page"
    rows = page.locator("tbody tr")
    assert rows.count() == 2
    assert XSS in page.inner_text("main")  # shown as text, never run
    assert page.evaluate("() => window.__pwned") is None
    started = page.locator("time").first
    assert "UTC" in (started.get_attribute("title") or "")  # rewritten in the viewer's zone
    assert "UTC" not in started.inner_text()
    page.screenshot(path=str(ARTIFACTS / "profiles.png"), full_page=True)

    page.get_by_role("row", name="app.jobs.Crunch").get_by_role("link", name="View").click()
    page.wait_for_selector("caption")
    assert "functions by cumulative time" in page.inner_text("caption")
    assert "(fibonacci)" in page.inner_text("main")
    assert "alice" in page.inner_text("dl.fields")
    page.screenshot(path=str(ARTIFACTS / "profile.png"), full_page=True)
    with page.expect_download() as download:
        page.get_by_role("link", name="Download").click()
    saved = download.value
    assert saved.suggested_filename == "alice-" + "a" * 24 + ".prof"
    # The browser saved it unpacked: the .prof file pstats opens.
    assert pstats.Stats(str(saved.path())).total_calls > 1973  # type: ignore[attr-defined]

    page.goto(url + "/profiles")
    page.wait_for_selector(".profiles[data-ready]")
    page.get_by_role("row", name="app.jobs.Crunch").get_by_role("button", name="Delete").click()
    page.wait_for_function("() => document.querySelectorAll('tbody tr').length === 1")
    assert redis.exists("alice-" + "a" * 24) == 0
    assert redis.zcard("profiles") == 1
