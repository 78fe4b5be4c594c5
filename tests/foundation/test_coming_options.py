"""Options of features that are installed but not built yet are refused.

The stub feature plugins installed in the test environment claim their options
(``encrypt``, ``unique_for``, ``unique_until``) without implementing them. A
job that sets one must fail before anything reaches Redis: pushing it as if the
feature were there would write arguments in clear text or push duplicates.
"""

from __future__ import annotations

import pytest

import wurk
from wurk import testing
from wurk.errors import UnknownOptionError
from wurk.options import OptionRegistry

ENCRYPT_REFUSED = "the 'encrypt' option needs wurk-crypto, which does not implement it yet; nothing was pushed"
UNIQUE_FOR_REFUSED = "the 'unique_for' option needs wurk-unique, which does not implement it yet; nothing was pushed"


class Secret(wurk.Job, encrypt=True):
    def perform(self, card: str) -> None:
        pass


class Plain(wurk.Job):
    def perform(self, *args: object) -> None:
        pass


@pytest.fixture
def config(config: wurk.Config) -> wurk.Config:
    """The suite's configuration, with the stub plugins checked to be active,
    so a pass here is never a pass because a plugin was switched off."""
    assert config.plugins.is_enabled("crypto")
    assert config.plugins.is_enabled("unique")
    return config


def test_the_stub_plugins_reserve_their_options_without_implementing_them(config):
    options = config.job_options
    for name, owner in [("encrypt", "wurk-crypto"), ("unique_for", "wurk-unique"), ("unique_until", "wurk-unique")]:
        assert options.owner(name) == owner
        assert not options.implemented(name)
    assert options.implemented("queue")
    assert not options.implemented("no_such_option")


def test_a_class_option_of_a_coming_feature_is_refused_at_enqueue(config, redis):
    with pytest.raises(UnknownOptionError) as refused:
        Secret.perform_async("4111 1111 1111 1111")
    assert str(refused.value) == f"job {wurk.payload.class_name(Secret)}: {ENCRYPT_REFUSED}"
    with pytest.raises(UnknownOptionError, match=ENCRYPT_REFUSED):
        Secret.perform_in(60, "4111 1111 1111 1111")
    with pytest.raises(UnknownOptionError, match=ENCRYPT_REFUSED):
        Secret.perform_bulk([["4111 1111 1111 1111"], ["5500 0000 0000 0004"]])
    assert redis.dbsize() == 0


def test_a_per_call_option_of_a_coming_feature_is_refused(config, redis):
    with pytest.raises(UnknownOptionError, match=UNIQUE_FOR_REFUSED):
        Plain.set(unique_for=60).perform_async(1)
    with pytest.raises(UnknownOptionError, match=UNIQUE_FOR_REFUSED):
        Plain.set(unique_for=60, wait=30).perform_async(1)
    with pytest.raises(UnknownOptionError, match="the 'unique_until' option needs wurk-unique"):
        Plain.set(unique_until="success").perform_async(1)
    with pytest.raises(UnknownOptionError, match=ENCRYPT_REFUSED):
        Plain.set(encrypt=True).perform_async("secret")
    assert redis.dbsize() == 0


def test_duplicate_unique_jobs_are_all_refused_not_all_pushed(config, redis):
    for _ in range(3):
        with pytest.raises(UnknownOptionError, match=UNIQUE_FOR_REFUSED):
            Plain.set(unique_for=60).perform_async("same", "args")
    assert redis.dbsize() == 0


def test_a_client_payload_with_a_coming_option_is_refused(config, redis):
    client = wurk.Client(config)
    with pytest.raises(UnknownOptionError, match=ENCRYPT_REFUSED):
        client.push({"class": "app.jobs.ChargeCard", "args": ["4111 1111 1111 1111"], "encrypt": True})
    with pytest.raises(UnknownOptionError, match=UNIQUE_FOR_REFUSED):
        client.push({"class": Plain, "args": [1], "unique_for": 60, "at": 2_000_000_000})
    with pytest.raises(UnknownOptionError, match=UNIQUE_FOR_REFUSED):
        client.push_bulk({"class": Plain, "args": [[1], [2]], "unique_for": 60})
    assert redis.dbsize() == 0


def test_fake_mode_refuses_them_too(config, redis):
    """A test suite in fake mode must not pass where production would fail."""
    with testing.fake(), pytest.raises(UnknownOptionError, match=ENCRYPT_REFUSED):
        Secret.perform_async("4111 1111 1111 1111")
    assert Secret.jobs == []
    assert redis.dbsize() == 0


def test_the_same_job_without_the_option_is_pushed(config, redis):
    """Only the coming option is refused, not the job or the queue."""
    assert Plain.perform_async(1)
    assert redis.llen("queue:default") == 1


def test_implementing_the_feature_only_flips_the_flag():
    options = OptionRegistry()
    options.add("encrypt", owner="wurk-crypto", implemented=False)
    with pytest.raises(UnknownOptionError, match=ENCRYPT_REFUSED):
        options.check({"encrypt": True})
    options.add("encrypt", owner="wurk-crypto")
    assert options.implemented("encrypt")
    options.check({"encrypt": True})
