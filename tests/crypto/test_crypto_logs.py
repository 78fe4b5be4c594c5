"""What a worker and the shell print about an encrypted job that fails: never
its plaintext. A real worker logs at DEBUG, in development (tracebacks
shown), with ``args`` among the logged job attributes, runs encrypted jobs
that fail, retry, die and cannot be decrypted; its whole log, the retries
and dead listings of the command line and the dashboard are then searched for
the secrets (docs/security.md)."""

from __future__ import annotations

import subprocess
import sys

import pytest

import wurk_web
from tests.crypto.test_crypto_workers import CARD, SECRETS, flip_one_ciphertext_byte, push, tamper
from tests.helpers import ROOT, wait_for
from tests.web.live import client_for


@pytest.mark.timeout(120)
def test_no_log_line_listing_or_page_shows_the_plaintext(crypto, redis, redis_url, crypto_workers, tmp_path):
    push("Declined", 1, "s3cr3t-token-XYZ", encrypt=True, retry=3)
    push("DeclinedForGood", 2, CARD, encrypt=True, retry=0)
    push("Secret", 3, CARD, encrypt=True)
    tamper(redis, flip_one_ciphertext_byte)  # the last one pushed: dies undecrypted
    settings = tmp_path / "wurk.yml"
    settings.write_text("logged_job_attributes:\n  - bid\n  - tags\n  - args\n")
    worker = crypto_workers.start("-c", "2", "-v", "-e", "development", "-C", str(settings), env={"WURK_DEBUG": "1"})
    wait_for(lambda: redis.zcard("retry") == 1 and redis.zcard("dead") == 2, timeout=30)
    worker.stop()
    log = worker.output()
    assert "'__wurk_enc__': True" in log  # args were logged: as the envelope
    assert "card declined for good" in log  # the failures were logged, tracebacks and all
    assert "Traceback" in log or "perform" in log
    assert "DecryptionError" in log

    shell = [
        subprocess.run(
            [sys.executable, "-m", "wurk.cli", command],
            env={"REDIS_URL": redis_url, "PATH": "/usr/bin:/bin"},
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        ).stdout
        for command in ("retries", "dead")
    ]
    with client_for(wurk_web.create_app(crypto)) as web:
        pages = [web.get(f"/api/sets/{kind}").text for kind in ("retries", "dead")]
        for kind in ("retries", "dead"):
            for entry in web.get(f"/api/sets/{kind}").json()["entries"]:
                pages.append(web.get(f"/api/sets/{kind}/entry", params={"id": entry["id"]}).text)
    for text in (log, *shell, *pages):
        for secret in SECRETS:
            assert secret.decode() not in text, secret
    assert all("[encrypted data]" in text for text in pages)
