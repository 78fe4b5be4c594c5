"""Throw-away certificates for the TLS test servers: one CA that signs a
server certificate (for 127.0.0.1 and localhost) and a client certificate,
plus a second, unrelated CA for the tests of a client that trusts the wrong one."""

from __future__ import annotations

import datetime
import ipaddress
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from wurk.redis.servers import TLSFiles

Key = ec.EllipticCurvePrivateKey


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _write(path: Path, key: Key | None, cert: x509.Certificate | None) -> Path:
    if key is not None:
        path.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
        )
    if cert is not None:
        path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return path


def _certificate(
    subject: str, key: Key, issuer: tuple[x509.Name, Key] | None, *, ca: bool = False, server: bool = False
) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    issuer_name, issuer_key = issuer or (_name(subject), key)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(subject))
        .issuer_name(issuer_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if ca:
        builder = builder.add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True
        )
    else:
        usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
        builder = builder.add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    if server:
        names = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def make_ca(directory: Path, name: str = "ca") -> tuple[Path, x509.Name, Key]:
    """A self-signed CA in ``directory/<name>.pem``."""
    key = ec.generate_private_key(ec.SECP256R1())
    cert = _certificate(f"wurk test {name}", key, None, ca=True)
    return _write(directory / f"{name}.pem", None, cert), cert.subject, key


def make_tls_files(directory: Path) -> TLSFiles:
    """A CA, a server certificate and a client certificate, in ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    ca_path, ca_name, ca_key = make_ca(directory)
    files = {}
    for role in ("server", "client"):
        key = ec.generate_private_key(ec.SECP256R1())
        cert = _certificate(f"wurk test {role}", key, (ca_name, ca_key), server=role == "server")
        files[role] = (_write(directory / f"{role}.pem", None, cert), _write(directory / f"{role}.key", key, None))
    return TLSFiles(
        ca=ca_path,
        server_cert=files["server"][0],
        server_key=files["server"][1],
        client_cert=files["client"][0],
        client_key=files["client"][1],
    )
