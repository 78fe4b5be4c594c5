"""The pytest plugin, from an application's point of view: a separate pytest
run (a real subprocess) over a small application and its test files, with
the plugin found through wurk-core's ``pytest11`` entry point.
"""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

APP_JOBS = """
import wurk

RAN = []


class OrderJob(wurk.Job):
    def perform(self, order_id):
        RAN.append(order_id)
        return order_id


class ReceiptJob(wurk.Job, queue="mail"):
    async def perform(self, order_id):
        RAN.append(("receipt", order_id))


class BrokenJob(wurk.Job):
    def perform(self):
        raise ValueError("card declined")


class TenantMiddleware(wurk.ServerMiddleware):
    def call(self, job_instance, job, queue, call_next):
        RAN.append(("tenant", queue))
        return call_next()
"""


@pytest.fixture
def app(pytester: pytest.Pytester, redis_url: str, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """A project with an ``app_jobs`` module, pointed at the test server."""
    monkeypatch.setenv("REDIS_URL", redis_url)
    pytester.makepyfile(app_jobs=APP_JOBS)
    return pytester


def run(app: pytest.Pytester, *args: str) -> pytest.RunResult:
    return app.runpytest_subprocess("-W", "error", "-p", "no:cacheprovider", *args)


def test_the_fixtures_are_registered_through_the_entry_point(app):
    result = run(app, "--fixtures")
    result.stdout.fnmatch_lines(["*wurk_fake*", "*wurk_inline*", "*wurk_testing_middleware*"])
    assert result.ret == 0


def test_the_plugin_can_be_switched_off_by_name(app):
    app.makepyfile(
        test_off="""
        def test_uses_the_fixture(wurk_fake):
            pass
        """
    )
    result = run(app, "-p", "no:wurk")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*fixture 'wurk_fake' not found*"])


def test_wurk_fake_collects_jobs_for_one_test_and_cleans_up(app):
    app.makepyfile(
        test_fake="""
        import threading

        from wurk import testing

        from app_jobs import RAN, OrderJob, ReceiptJob


        def test_collects_and_runs_nothing(wurk_fake):
            assert wurk_fake is testing.queues
            assert testing.is_fake()
            jid = OrderJob.perform_async(1)
            ReceiptJob.perform_in(3600, 1)
            assert [job["jid"] for job in OrderJob.jobs] == [jid]
            assert "at" in ReceiptJob.jobs[0]
            assert wurk_fake["mail"] == ReceiptJob.jobs
            assert RAN == []


        def test_draining_runs_them(wurk_fake):
            OrderJob.perform_async(2)
            ReceiptJob.perform_async(2)
            assert OrderJob.drain() == 1
            assert testing.drain_all() == 1
            assert RAN == [2, ("receipt", 2)]


        def test_covers_threads_the_test_starts(wurk_fake):
            thread = threading.Thread(target=OrderJob.perform_async, args=(3,))
            thread.start()
            thread.join()
            assert [job["args"] for job in OrderJob.jobs] == [[3]]


        def test_a_block_of_another_mode_can_open_inside(wurk_fake):
            with testing.inline():
                OrderJob.perform_async(4)
            OrderJob.perform_async(5)
            assert RAN[-1] == 4
            assert [job["args"] for job in OrderJob.jobs] == [[5]]


        def test_leaves_jobs_behind(wurk_fake):
            OrderJob.perform_async(6)


        def test_the_next_test_starts_clean_and_disabled():
            assert testing.mode() == "disable"
            assert testing.queues.jobs() == []
        """
    )
    result = run(app, "-v")
    result.assert_outcomes(passed=6)


def test_wurk_inline_runs_jobs_at_once_and_errors_reach_the_test(app):
    app.makepyfile(
        test_inline="""
        import pytest

        from wurk import testing

        from app_jobs import RAN, BrokenJob, OrderJob, ReceiptJob


        def test_runs_at_once(wurk_inline):
            assert testing.is_inline()
            OrderJob.perform_async(1)
            ReceiptJob.perform_in(3600, 2)
            assert RAN == [1, ("receipt", 2)]


        def test_an_exception_reaches_the_test(wurk_inline):
            with pytest.raises(ValueError, match="card declined"):
                BrokenJob.perform_async()


        def test_an_unexpected_exception_fails_the_test(wurk_inline):
            BrokenJob.perform_async()


        def test_the_mode_is_back_afterwards():
            assert testing.mode() == "disable"
        """
    )
    result = run(app)
    result.assert_outcomes(passed=3, failed=1)
    result.stdout.fnmatch_lines(["*ValueError: card declined*"])


def test_the_mode_fixtures_restore_a_suite_wide_mode(app):
    app.makeconftest(
        """
        import wurk

        wurk.testing.fake()
        """
    )
    app.makepyfile(
        test_suite_mode="""
        from wurk import testing

        from app_jobs import RAN, OrderJob


        def test_the_suite_is_fake():
            assert testing.is_fake()


        def test_one_test_runs_inline(wurk_inline):
            OrderJob.perform_async(1)
            assert RAN == [1]


        def test_fake_again_afterwards():
            assert testing.is_fake()
            OrderJob.perform_async(2)
            assert RAN == [1]
        """
    )
    run(app).assert_outcomes(passed=3)


def test_wurk_testing_middleware_is_the_testing_chain_restored_after_the_test(app):
    app.makepyfile(
        test_chain="""
        from wurk import testing

        from app_jobs import RAN, OrderJob, TenantMiddleware


        def test_middleware_runs_inline(wurk_inline, wurk_testing_middleware):
            assert wurk_testing_middleware is testing.server_middleware
            wurk_testing_middleware.add(TenantMiddleware)
            OrderJob.perform_async(1)
            assert RAN == [("tenant", "default"), 1]


        def test_and_when_draining(wurk_fake, wurk_testing_middleware):
            wurk_testing_middleware.add(TenantMiddleware)
            OrderJob.set(queue="orders").perform_async(2)
            OrderJob.drain()
            assert RAN[-2:] == [("tenant", "orders"), 2]


        def test_the_chain_is_empty_again():
            assert testing.server_middleware.empty()
        """
    )
    run(app).assert_outcomes(passed=3)
