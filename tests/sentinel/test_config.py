"""Configuring a Sentinel-managed primary: the URL, ``config.redis``, YAML, errors, masking.

The forms are read without a server; each one is then used for real against
one primary, one replica and three sentinels, the data nodes and the
sentinels each with their own password.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import wurk
from tests.helpers import ROOT, Subprocess, tls_mode, wait_for
from tests.sentinel.cluster import DATA_PASSWORD, SENTINEL_PASSWORD, SERVICE, SentinelCluster
from tests.sentinel.failover_app import EVIDENCE_ENV, Recorded
from wurk.redis.connection import RedisPool, mask_url
from wurk.redis.sentinel import parse_sentinel_url

WURK = str(Path(sys.executable).parent / "wurk")


def parsed(url: str) -> dict:
    return parse_sentinel_url(url, mask_url(url))


def test_the_url_names_the_sentinels_the_service_the_database_and_both_passwords():
    url = "redis+sentinel://:d%40ta@10.0.0.1:26380,10.0.0.2,[::1]:26381/mymaster/3?sentinel_password=s3nt"
    assert parsed(url) == {
        "password": "d@ta",
        "sentinels": [("10.0.0.1", 26380), ("10.0.0.2", 26379), ("::1", 26381)],
        "master_name": "mymaster",
        "db": 3,
        "sentinel_password": "s3nt",
    }
    acl = parsed("redis+sentinel://app:pw@s1:26379/cache?sentinel_username=watch&sentinel_password=x&socket_timeout=4")
    assert (acl["username"], acl["password"], acl["sentinel_username"], acl["socket_timeout"]) == (
        "app",
        "pw",
        "watch",
        4.0,
    )
    assert "db" not in parsed("redis+sentinel://s1/cache")  # the database is 0 unless the path says


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("rediss+sentinel://s1:26379/mymaster", "TLS to Sentinel (rediss+sentinel://) is not supported"),
        ("redis+sentinel:///mymaster", "names no sentinel"),
        ("redis+sentinel://s1:26379", "names no service"),
        ("redis+sentinel://s1:26379/", "names no service"),
        ("redis+sentinel://s1:26379/mymaster/zero", "the database 'zero' is not a whole number"),
        ("redis+sentinel://s1:26379/mymaster/0/extra", "has a path of more than two parts"),
        ("redis+sentinel://s1:port/mymaster", "the sentinel address 's1:port' has a port that is not a number"),
        ("redis+sentinel://s1,:26379/mymaster", "the sentinel address ':26379' has no host"),
        ("redis+sentinel://s1/mymaster?ssl_ca_certs=/ca.pem", "ssl_ca_certs needs TLS"),
        ("redis+sentinel://s1/mymaster?socket_timeout=soon", "Invalid value for 'socket_timeout'"),
    ],
)
def test_a_bad_url_is_one_line_naming_the_problem_with_its_passwords_masked(url, problem):
    secret = url.replace("://", "://:hunter2@", 1) + ("&" if "?" in url else "?") + "sentinel_password=hunter3"
    with pytest.raises(wurk.ConfigurationError) as caught:
        RedisPool({"url": secret}, size=1, name="bad")
    message = str(caught.value)
    assert problem in message
    assert "\n" not in message
    assert "hunter2" not in message
    assert "hunter3" not in message


def test_config_redis_keys_need_a_service_name_and_real_addresses():
    with pytest.raises(wurk.ConfigurationError, match="needs 'master_name' too"):
        RedisPool({"sentinels": ["s1:26379"]}, size=1, name="incomplete")
    with pytest.raises(wurk.ConfigurationError, match=r"entry 26379 is not an address"):
        RedisPool({"sentinels": [26379], "master_name": "m"}, size=1, name="bad")


def test_a_pool_shows_its_setup_without_any_secret():
    url = "redis+sentinel://app:d4ta@s1:26379,s2:26380/mymaster/2?sentinel_password=s3nt"
    pool = RedisPool({"url": url}, size=1, name="shown")
    assert pool.url == "redis+sentinel://app:***@s1:26379,s2:26380/mymaster/2"
    assert "d4ta" not in repr(pool)
    assert mask_url(url) == "redis+sentinel://app:***@s1:26379,s2:26380/mymaster/2?sentinel_password=***"
    keys = RedisPool({"sentinels": [("s1", 26379)], "master_name": "m", "password": "x"}, size=1, name="keys")
    assert keys.url == "redis+sentinel://:***@s1:26379/m/0"


# -- against a real Sentinel setup ----------------------------------------------------------


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[SentinelCluster]:
    if tls_mode():
        pytest.skip("the Sentinel cluster is plain TCP (WURK_TEST_TLS=1 is for one server)")
    with SentinelCluster(tmp_path_factory.mktemp("sentinel")) as running:
        yield running


@pytest.fixture
def on_primary(cluster):
    client = cluster.primary.client()
    client.flushall()
    yield client
    client.close()


def test_every_form_reaches_the_primary_through_the_sentinels(cluster, on_primary):
    hosts = [f"127.0.0.1:{node.port}" for node in cluster.sentinels]
    forms = {
        "url": {"url": cluster.url(db=1)},
        "keys": {
            "sentinels": hosts,
            "master_name": SERVICE,
            "db": 2,
            "password": DATA_PASSWORD,
            "sentinel_password": SENTINEL_PASSWORD,
        },
        "url and keys": {"url": cluster.url(db=3, sentinel_password=False), "sentinel_password": SENTINEL_PASSWORD},
    }
    for db, (form, options) in enumerate(forms.items(), start=1):
        config = wurk.Config()
        config.redis = options
        try:
            jid = wurk.Client(config).push({"class": "Remote", "args": [form]})
        finally:
            config.reset_redis_pools()
        on_primary.execute_command("SELECT", db)
        assert jid.encode() in on_primary.lindex("queue:default", 0), form
    on_primary.execute_command("SELECT", 0)


def test_the_cli_reads_the_url_from_redis_url(cluster, on_primary):
    wurk.Client(config_for(cluster.url())).push({"class": "Remote", "args": [1], "queue": "sentinel_q"})
    env = {"REDIS_URL": cluster.url(), "PATH": str(Path(sys.executable).parent)}
    out = subprocess.run([WURK, "queues"], env=env, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "sentinel_q" in out.stdout


def test_a_worker_takes_the_sentinels_from_its_yaml_file(cluster, on_primary, tmp_path):
    hosts = "\n".join(f"    - 127.0.0.1:{node.port}" for node in cluster.sentinels)
    (tmp_path / "wurk.yml").write_text(
        f"redis:\n  sentinels:\n{hosts}\n  master_name: {SERVICE}\n  password: {DATA_PASSWORD}\n"
        f"  sentinel_password: {SENTINEL_PASSWORD}\n"
    )
    evidence = tmp_path / "evidence"
    jid = wurk.Client(config_for(cluster.url())).push({"class": Recorded, "args": [1]})
    worker = Subprocess(
        [WURK, "-C", str(tmp_path / "wurk.yml"), "-r", "tests.sentinel.failover_app", "-c", "2"],
        env={"REDIS_URL": "redis://127.0.0.1:1/0", EVIDENCE_ENV: str(evidence), "PYTHONPATH": str(ROOT)},
        cwd=ROOT,
        log=tmp_path / "worker.log",
    )
    try:
        wait_for(lambda: evidence.exists() and jid in evidence.read_text(), timeout=30)
    finally:
        worker.stop()
    log = (tmp_path / "worker.log").read_text()
    assert DATA_PASSWORD not in log
    assert SENTINEL_PASSWORD not in log


def test_a_wrong_sentinel_password_is_named_in_one_line_without_the_password(cluster):
    url = cluster.url().replace(SENTINEL_PASSWORD, "not-the-password")
    env = {"REDIS_URL": url, "PATH": str(Path(sys.executable).parent)}
    out = subprocess.run([WURK, "queues"], env=env, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode != 0
    said = out.stderr.strip()
    assert "not-the-password" not in said
    assert DATA_PASSWORD not in said
    assert said.count("\n") == 0, said
    assert f"the sentinels refused their password, so none named the primary of '{SERVICE}'" in said
    assert "check sentinel_password" in said

    unknown = cluster.url().replace(f"/{SERVICE}/", "/nosuchservice/")
    out = subprocess.run(
        [WURK, "queues"], env={**env, "REDIS_URL": unknown}, cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert "the sentinels name no primary of 'nosuchservice' that is up: check the service name" in out.stderr


def config_for(url: str) -> wurk.Config:
    config = wurk.Config()
    config.redis = {"url": url}
    return config


def test_swarm_children_reach_the_primary_through_the_sentinels(cluster, on_primary, tmp_path):
    evidence = tmp_path / "evidence"
    jids = wurk.Client(config_for(cluster.url())).push_bulk({"class": Recorded, "args": [[n] for n in range(20)]})
    swarm = Subprocess(
        [sys.executable, "-m", "wurk_swarm", "-r", "tests.sentinel.failover_app", "-c", "2"],
        env={"REDIS_URL": cluster.url(), "WURK_COUNT": "2", EVIDENCE_ENV: str(evidence), "PYTHONPATH": str(ROOT)},
        cwd=ROOT,
        log=tmp_path / "swarm.log",
    )
    try:
        wait_for(lambda: evidence.exists() and all(jid in evidence.read_text() for jid in jids), timeout=60)
    finally:
        swarm.stop(timeout=30)
    log = (tmp_path / "swarm.log").read_text()
    assert DATA_PASSWORD not in log
    assert SENTINEL_PASSWORD not in log
