"""Resolving a callback's target where it runs, and what cannot be resolved."""

from __future__ import annotations

import pytest

from tests.batches.jobs import Done
from wurk_batches.callbacks import CallbackJob, UnresolvableTarget, resolve


def test_each_form_resolves_to_a_bound_method_of_a_fresh_instance(config):
    method = resolve("tests.batches.jobs.Done", "success", config)
    assert method.__func__ is Done.on_success
    assert resolve("tests.batches.jobs.Done#finished", "complete", config).__func__ is Done.finished
    assert resolve("tests.batches.jobs.Done", "success", config).__self__ is not method.__self__


@pytest.mark.parametrize(
    ("target", "event", "message"),
    [
        ("#finished", "success", "names no class and the batch has no callback_class"),
        ("tests.batches.jobs.Nope", "success", "tests.batches.jobs has no Nope"),
        ("tests.batches", "success", "tests.batches is a module, not a class"),
        ("tests.batches.jobs.Row.perform_async", "success", "is a method, not a class"),
        ("tests.batches.jobs.Done", "death", "has no public method on_death()"),
        ("tests.batches.jobs.Done#_record", "success", "has no public method _record()"),
        ("nowhere.near.Anything", "success", "neither imported by the worker nor in an allowed package"),
    ],
)
def test_what_cannot_be_resolved_says_why(config, target, event, message):
    with pytest.raises(UnresolvableTarget, match=message):
        resolve(target, event, config)


def test_a_module_is_imported_only_from_an_allowed_package(config):
    import sys

    sys.modules.pop("wave", None)
    with pytest.raises(UnresolvableTarget, match="allowed: none"):
        resolve("wave.Wave_read", "success", config)
    assert "wave" not in sys.modules  # refused without importing it
    config.jobs.allow("wave")
    with pytest.raises(UnresolvableTarget, match=r"wave\.Wave_read has no public method on_success"):
        resolve("wave.Wave_read", "success", config)


def test_an_unresolvable_target_is_killed_on_the_first_attempt_and_a_body_error_retries():
    assert CallbackJob.retry_in(0, UnresolvableTarget("x"), {}) == "kill"
    assert CallbackJob.retry_in(0, RuntimeError("x"), {}) is None
    assert CallbackJob.wurk_options["retry"] is True
