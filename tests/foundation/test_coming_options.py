"""Feature options are refused, before anything reaches Redis, whenever their
feature cannot honour them: its plugin is missing or switched off, or the
plugin reserves the option for a feature it does not implement yet.

Pushing such a job as if the feature were there would write arguments in
clear text or push duplicates the caller meant to be dropped.
"""

from __future__ import annotations

import re

import pytest

import wurk
from wurk import testing
from wurk.config.options import OptionRegistry
from wurk.errors import UnknownOptionError

COMING_REFUSED = "the 'audit_trail' option needs wurk-trail, which does not implement it yet; nothing was pushed"


class Secret(wurk.Job, encrypt=True):
    def perform(self, card: str) -> None:
        pass


class Plain(wurk.Job):
    def perform(self, *args: object) -> None:
        pass


class ComingFeature:
    """A feature plugin that claims its option before the feature exists."""

    @wurk.hookimpl
    def wurk_register_options(self, options: OptionRegistry) -> None:
        options.add("audit_trail", owner="wurk-trail", implemented=False)


@pytest.fixture
def coming(config: wurk.Config) -> wurk.Config:
    config.plugins.register(ComingFeature(), name="trail")
    return config


@pytest.fixture
def without_features(redis_url: str, monkeypatch: pytest.MonkeyPatch):
    """The process default configuration with wurk-unique and wurk-crypto
    switched off, as ``WURK_DISABLE_PLUGINS=unique,crypto`` does."""
    cfg = wurk.Config(disabled_plugins=["unique", "crypto"])
    cfg.redis = {"url": redis_url}
    previous = wurk.set_default_config(cfg)
    try:
        yield cfg
    finally:
        wurk.set_default_config(previous)
        cfg.reset_redis_pools()


def test_unique_and_crypto_implement_the_options_they_own(config):
    options = config.job_options
    for name, owner in [("encrypt", "wurk-crypto"), ("unique_for", "wurk-unique"), ("unique_until", "wurk-unique")]:
        assert options.owner(name) == owner
        assert options.implemented(name)


def test_a_reserved_option_is_owned_but_not_implemented(coming):
    options = coming.job_options
    assert options.owner("audit_trail") == "wurk-trail"
    assert not options.implemented("audit_trail")
    assert options.implemented("queue")
    assert not options.implemented("no_such_option")


def test_a_reserved_option_is_refused_on_every_push_path(coming, redis):
    with pytest.raises(UnknownOptionError) as refused:
        Plain.set(audit_trail=True).perform_async(1)
    assert str(refused.value) == f"job {wurk.client.payload.class_name(Plain)}: {COMING_REFUSED}"
    with pytest.raises(UnknownOptionError, match=COMING_REFUSED):
        Plain.set(audit_trail=True, wait=30).perform_async(1)
    with pytest.raises(UnknownOptionError, match=COMING_REFUSED):
        Plain.set(audit_trail=True).perform_bulk([[1], [2]])
    client = wurk.Client(coming)
    with pytest.raises(UnknownOptionError, match=COMING_REFUSED):
        client.push({"class": "app.jobs.Charge", "args": [1], "audit_trail": True, "at": 2_000_000_000})
    with testing.fake(), pytest.raises(UnknownOptionError, match=COMING_REFUSED):
        Plain.set(audit_trail=True).perform_async(1)
    assert Plain.jobs == []
    assert redis.dbsize() == 0


def test_options_of_a_disabled_plugin_name_the_plugin_and_its_distribution(without_features, redis):
    assert not without_features.plugins.is_enabled("unique")
    assert not without_features.plugins.is_enabled("crypto")
    refused = (
        "job option '{}' belongs to the '{}' plugin of {}, which is switched off by WURK_DISABLE_PLUGINS "
        "or config['disabled_plugins']; switch the plugin on, or push the job without '{}'. Nothing was pushed"
    )
    with pytest.raises(UnknownOptionError) as crypto:
        Secret.perform_async("4111 1111 1111 1111")
    assert str(crypto.value) == f"job {Secret.__module__}.Secret: " + refused.format(
        "encrypt", "crypto", "wurk-crypto", "encrypt"
    )
    with pytest.raises(
        UnknownOptionError, match=re.escape(refused.format(*("unique_for", "unique", "wurk-unique"), "unique_for"))
    ):
        Plain.set(unique_for=60).perform_async(1)
    with pytest.raises(UnknownOptionError, match="'unique_until' belongs to the 'unique' plugin of wurk-unique"):
        Plain.set(unique_until="start").perform_bulk([[1], [2]])
    with testing.fake(), pytest.raises(UnknownOptionError, match="wurk-crypto"):
        Secret.perform_async("4111 1111 1111 1111")
    assert Secret.jobs == []
    assert redis.dbsize() == 0


def test_a_feature_option_names_the_distribution_to_install_when_nothing_publishes_it():
    """Wurk's own feature options, with their distribution not installed at
    all (so no metadata to name a plugin): the hint says what to install."""
    with pytest.raises(UnknownOptionError, match=re.escape("job option 'encrypt' needs the wurk-crypto plugin: is")):
        OptionRegistry().check({"class": "Job", "encrypt": True})


def test_the_same_job_without_the_option_is_pushed(without_features, redis):
    """Only the option is refused, not the job or the queue."""
    assert Plain.perform_async(1)
    assert redis.llen("queue:default") == 1


def test_implementing_the_feature_only_flips_the_flag():
    options = OptionRegistry()
    options.add("audit_trail", owner="wurk-trail", implemented=False)
    with pytest.raises(UnknownOptionError, match=COMING_REFUSED):
        options.check({"audit_trail": True})
    options.add("audit_trail", owner="wurk-trail")
    assert options.implemented("audit_trail")
    options.check({"audit_trail": True})
