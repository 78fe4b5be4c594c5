"""Job profiles across languages: a profile a Python worker stored is listed by
Ruby Sidekiq 8's ``ProfileSet`` and its Web UI's Profiles tab. Ruby cannot open
the data (it is Python's ``pstats``), but the listing fields are Sidekiq's own.

Run with::

    WURK_INTEROP_CHROOT=/srv/forky .venv/bin/python -m pytest -m interop tests/interop/test_profiles.py
"""

from __future__ import annotations

import pytest

from tests.helpers import wait_for
from tests.interop.conftest import Interop
from tests.interop.interop_app import PyEcho
from tests.interop.test_ruby_sidekiq import emit, ruby_script

pytestmark = [pytest.mark.interop, pytest.mark.timeout(240)]

RUBY_LISTS_PROFILES = """
rows = Sidekiq::ProfileSet.new.map do |r|
  {key: r.key, token: r.token, jid: r.jid, type: r.type, size: r.size, elapsed: r.elapsed,
   started_at: r.started_at.to_i, data_bytes: r.data.bytesize}
end
"""


def test_ruby_lists_a_profile_a_python_worker_stored(interop: Interop) -> None:
    interop.start_python_worker()
    jid = PyEcho.set(profile="alice").perform_async("profiled")
    wait_for(lambda: interop.redis.zcard("profiles") == 1, timeout=20)
    fields = ("size", "elapsed", "started_at")  # not data: the harness's client decodes replies as text
    stored = dict(zip(fields, interop.redis.hmget(f"alice-{jid}", fields), strict=True))

    [row] = interop.ruby(ruby_script(RUBY_LISTS_PROFILES + emit("rows")))
    assert row["key"] == f"alice-{jid}"
    assert (row["token"], row["jid"], row["type"]) == ("alice", jid, "tests.interop.interop_app.PyEcho")
    assert row["size"] == row["data_bytes"] == int(stored["size"])
    assert row["elapsed"] == pytest.approx(float(stored["elapsed"]))
    assert row["started_at"] == int(stored["started_at"])

    port = interop.start_web()
    status, page = interop.get(port, "/profiles")
    assert status == 200
    assert jid in page
    assert "alice" in page
    assert "tests.interop.interop_app.PyEcho" in page
