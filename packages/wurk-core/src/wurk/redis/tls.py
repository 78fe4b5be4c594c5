"""Telling a TLS problem from an outage, in one line that says what to do.

redis-py reports a certificate the client does not trust, a client
certificate the server wants and did not get, and a plain connection to a
TLS-only port all as a ``ConnectionError`` (some only as "Connection reset by
peer"), which the pool would retry as if the server were down. None of them
goes away by retrying: :func:`tls_problem` recognises them, so the pool can
raise a :class:`wurk.errors.ConfigurationError` at once instead.

Most cases show in the exception itself (a verification failure, a missing
PEM file). Two only show as a dropped connection: a plain ``redis://`` client
on a TLS-only port, and a TLS client without the certificate the server
requires. For those, :func:`tls_problem` asks the server once more, with a
bare handshake, and only when the caller says this may be a first contact
(a pool that never got an answer): a server that worked before and now drops
connections is an outage, not a configuration mistake.
"""

from __future__ import annotations

import socket
import ssl
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qsl, urlsplit

#: How long the diagnosing handshake may take; a server that says nothing
#: for this long is no evidence either way.
PROBE_TIMEOUT = 1.0

#: The alerts by which a server turns down the certificate a client showed
#: (OpenSSL's reason codes end so, after a TLSV1_/SSLV3_ prefix).
REFUSED_CERTIFICATE_ALERTS = (
    "_ALERT_UNKNOWN_CA",
    "_ALERT_BAD_CERTIFICATE",
    "_ALERT_DECRYPT_ERROR",
    "_ALERT_CERTIFICATE_EXPIRED",
    "_ALERT_CERTIFICATE_REVOKED",
    "_ALERT_CERTIFICATE_UNKNOWN",
    "_ALERT_UNSUPPORTED_CERTIFICATE",
)

CLIENT_CERT_OPTIONS = "set ssl_certfile and ssl_keyfile (in config.redis, the YAML redis: section or the URL's query)"


def tls_options(url: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """The ``ssl_*`` options in force: ``options``, overridden by the URL's
    query (redis-py lets the query win)."""
    found: dict[str, Any] = {key: value for key, value in options.items() if key.startswith("ssl_")}
    found.update({key: value for key, value in parse_qsl(urlsplit(url).query) if key.startswith("ssl_")})
    return found


def tls_problem(url: str, options: Mapping[str, Any], exc: BaseException, *, first_contact: bool) -> str | None:
    """Why connecting to ``url`` failed, when TLS is the reason; else ``None``.

    ``options`` are the pool's ``ssl_*`` options besides the URL's query.
    The message names the host and port only, never the URL, which may
    hold a password.
    """
    parts = urlsplit(url)
    if parts.scheme.endswith("+sentinel"):
        return None  # no TLS through Sentinel (refused when the URL is read), and several hosts in one netloc
    uses_tls = parts.scheme == "rediss"
    where = f"Redis at {parts.hostname}:{parts.port or 6379}"
    causes = list(_chain(exc))
    for cause in causes:
        if isinstance(cause, ssl.SSLCertVerificationError):
            detail = cause.verify_message or str(cause)
            return (
                f"{where}: the server's TLS certificate was not accepted ({detail}). Set ssl_ca_certs to the CA "
                "file that signed it (a managed service publishes its CA), or fix the host name in the URL."
            )
        if isinstance(cause, FileNotFoundError) and uses_tls:
            files = ", ".join(f"{key}={value}" for key, value in tls_options(url, options).items() if _is_file(key))
            return f"{where}: a TLS file does not exist ({files or cause}). Check the ssl_* paths."
        if isinstance(cause, ssl.SSLError) and "PEM" in str(cause):
            return (
                f"{where}: the client's TLS certificate or key could not be loaded. ssl_certfile and ssl_keyfile "
                "must be PEM files of one key pair (both set), the key unencrypted or ssl_password set."
            )
        if isinstance(cause, ssl.SSLError) and cause.reason == "TLSV13_ALERT_CERTIFICATE_REQUIRED":
            return f"{where} requires a client certificate and got none: {CLIENT_CERT_OPTIONS}."
        if isinstance(cause, ssl.SSLError) and (cause.reason or "").endswith(REFUSED_CERTIFICATE_ALERTS):
            return _refused_certificate(where, cause.reason)
    if not first_contact or parts.scheme not in ("redis", "rediss") or parts.hostname is None:
        return None
    if uses_tls and any(isinstance(cause, TimeoutError) and "handshake" in str(cause) for cause in causes):
        return (
            f"{where} did not complete a TLS handshake: if the server on that port is not serving TLS, "
            "use a redis:// URL."
        )
    return _probe(where, parts.hostname, parts.port or 6379, uses_tls, tls_options(url, options))


def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    error: BaseException | None = exc
    while error is not None and all(error is not other for other in seen):
        seen.append(error)
        error = error.__cause__ or error.__context__
    return seen


def _is_file(key: str) -> bool:
    return key in ("ssl_ca_certs", "ssl_certfile", "ssl_keyfile", "ssl_ca_path")


def _probe(where: str, host: str, port: int, uses_tls: bool, options: Mapping[str, Any]) -> str | None:
    """Shake hands with the server once, trusting any certificate, to see
    whether it speaks TLS and whether it wants a certificate it was not shown."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    certfile = options.get("ssl_certfile")
    handshook = False
    try:
        if uses_tls and certfile:
            context.load_cert_chain(certfile, options.get("ssl_keyfile"), options.get("ssl_password"))
        with (
            socket.create_connection((host, port), timeout=PROBE_TIMEOUT) as raw,
            context.wrap_socket(raw, server_hostname=host) as sock,
        ):
            handshook = True
            sock.sendall(b"PING\r\n")
            answer = sock.recv(64)
    except ssl.SSLError as exc:
        if not uses_tls:
            return _plain_on_tls(where) if handshook else None
        if not certfile and _refused_for_certificate(exc):
            return f"{where} requires a client certificate and got none: {CLIENT_CERT_OPTIONS}."
        # TLS 1.3 checks a client certificate after the handshake: the
        # server's refusal reaches the client as its alert or, when the
        # client was writing, as the connection's end.
        if (
            certfile
            and handshook
            and ((exc.reason or "").endswith(REFUSED_CERTIFICATE_ALERTS) or isinstance(exc, ssl.SSLEOFError))
        ):
            return _refused_certificate(where, exc.reason or "the connection closed after the handshake")
        return None
    except OSError:
        if not uses_tls and handshook:  # the server hung up on a client without a certificate
            return _plain_on_tls(where)
        return None  # refused, timed out, reset: no evidence about TLS
    if not uses_tls:
        return _plain_on_tls(where)
    if not answer and not certfile:
        return f"{where} requires a client certificate and got none: {CLIENT_CERT_OPTIONS}."
    return None


def _refused_certificate(where: str, reason: str) -> str:
    return (
        f"{where} refused the client certificate ({reason}). ssl_certfile must be signed by a CA "
        "the server trusts (its tls-ca-cert-file), be current, and match ssl_keyfile."
    )


def _plain_on_tls(where: str) -> str:
    return f"{where} speaks TLS only: use a rediss:// URL (with ssl_ca_certs if its CA is private)."


def _refused_for_certificate(exc: ssl.SSLError) -> bool:
    reason = exc.reason or ""
    return "CERTIFICATE_REQUIRED" in reason or "HANDSHAKE_FAILURE" in reason or isinstance(exc, ssl.SSLEOFError)
