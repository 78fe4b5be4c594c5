"""A job option whose plugin is installed but switched off is refused at
enqueue, naming the option and the plugin (as docs/plugins.md says), for a
third party's plugin as for Wurk's own.

A switched-off plugin is never imported, so it cannot declare its options:
its distribution names them in its metadata (the ``wurk.options`` entry-point
group), which core reads without importing anything.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import wurk
from tests.foundation.test_plugins import install_dist
from wurk.config.options import published_options
from wurk.errors import UnknownOptionError
from wurk.plugins.manager import DISABLE_ENV, NO_AUTOLOAD_ENV

LEDGER = (
    "import wurk\n\n"
    "@wurk.hookimpl\n"
    "def wurk_register_options(options):\n"
    "    options.add('ledger_copies', owner='acme-ledger')\n"
)

REFUSED = (
    "job {job}: job option 'ledger_copies' belongs to the 'ledger' plugin of acme_ledger, which is {how}; "
    "switch the plugin on, or push the job without 'ledger_copies'. Nothing was pushed"
)


class Invoice(wurk.Job):
    def perform(self) -> None:
        pass


INVOICE = f"{Invoice.__module__}.Invoice"


@pytest.fixture
def ledger(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A third party's distribution publishing the ``ledger`` plugin and its
    ``ledger_copies`` option; its module is imported only if the plugin loads."""
    site = tmp_path / "site"
    site.mkdir()
    entry_points = "[wurk]\nledger = acme_ledger\n\n[wurk.options]\nledger_copies = acme_ledger\n"
    install_dist(site, "acme_ledger", LEDGER, entry_points)
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.delenv(DISABLE_ENV, raising=False)
    monkeypatch.delenv(NO_AUTOLOAD_ENV, raising=False)
    yield
    sys.modules.pop("acme_ledger", None)


def configured(redis_url: str, **options: object) -> wurk.Config:
    config = wurk.Config(options)
    config.redis = {"url": redis_url}
    return config


def test_the_option_of_a_switched_off_plugin_is_refused_naming_the_plugin(ledger, redis_url, redis):
    config = configured(redis_url, disabled_plugins=["ledger"])
    with pytest.raises(UnknownOptionError) as refused:
        wurk.Client(config).push({"class": Invoice, "args": [], "ledger_copies": 2})
    how = f"switched off by {DISABLE_ENV} or config['disabled_plugins']"
    assert str(refused.value) == REFUSED.format(job=INVOICE, how=how)
    assert redis.dbsize() == 0
    assert "acme_ledger" not in sys.modules  # named from its metadata, never imported
    assert wurk.Client(config).push({"class": Invoice, "args": []})  # without the option the job goes

    switched_on = configured(redis_url)
    assert wurk.Client(switched_on).push({"class": Invoice, "args": [], "ledger_copies": 2})
    assert switched_on.job_options.owner("ledger_copies") == "acme-ledger"
    assert redis.llen("queue:default") == 2


def test_with_autoload_off_the_refusal_says_the_configuration_does_not_name_the_plugin(
    ledger, redis_url, redis, monkeypatch
):
    monkeypatch.setenv(NO_AUTOLOAD_ENV, "1")
    config = configured(redis_url)
    with pytest.raises(UnknownOptionError) as refused:
        wurk.Client(config).push({"class": Invoice, "args": [], "ledger_copies": 2})
    how = f"not loaded: {NO_AUTOLOAD_ENV} is set and config['plugins'] does not name it"
    assert str(refused.value) == REFUSED.format(job=INVOICE, how=how)
    assert redis.dbsize() == 0

    named = configured(redis_url, plugins=["ledger"])
    assert wurk.Client(named).push({"class": Invoice, "args": [], "ledger_copies": 2})


def test_an_option_nobody_publishes_is_still_open(ledger, redis_url, redis):
    """Job options are open, as in Sidekiq: only a switched-off plugin's own are refused."""
    config = configured(redis_url, disabled_plugins=["ledger"])
    assert wurk.Client(config).push({"class": Invoice, "args": [], "ledger_notes": "custom middleware reads it"})


def test_each_distribution_publishes_the_options_its_plugin_declares(config):
    options = config.job_options
    declared = {name: options.owner(name) for name in options.names() if options.owner(name) != "wurk-core"}
    assert published_options() == declared
