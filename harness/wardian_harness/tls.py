"""A certificate authority made for one test run, and a server certificate for 127.0.0.1 signed by it: what a
loopback server of the harness (the private PostgreSQL server, the ChatGPT stand-in) presents, and what its client
is told to trust, so that a test verifies TLS fully (host name included) without any real CA.

The CA certificate carries the key usages a strict verifier asks of a CA (rustls, in Codex), and the server
certificate names 127.0.0.1 and localhost, is no CA, and is for server authentication only. Both are valid from five
minutes before they are made (a clock a little behind) for one day.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass

__all__ = ["ServerCertificate", "make_server_certificate"]


@dataclass(frozen=True, slots=True)
class ServerCertificate:
    """PEM texts: the CA's certificate (what a client verifies against), the server's certificate and its private key
    (PKCS8, unencrypted: the test server reads it without a pass phrase)."""

    ca: bytes
    cert: bytes
    key: bytes


def make_server_certificate(ca_name: str) -> ServerCertificate:
    """A new CA called `ca_name` and a certificate for 127.0.0.1 (and localhost) signed by it."""
    # cryptography loads only where a test serves TLS (it is a test dependency: pyproject's `dev` extra).
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.UTC)
    start, end = now - datetime.timedelta(minutes=5), now + datetime.timedelta(days=1)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    issuer = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, ca_name)])
    ca = (x509.CertificateBuilder().subject_name(issuer).issuer_name(issuer).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(start).not_valid_after(end)
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                       content_commitment=False, key_encipherment=False, data_encipherment=False,
                                       key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
            .issuer_name(issuer).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(start).not_valid_after(end)
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                                                        x509.DNSName("localhost")]), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    pem = serialization.Encoding.PEM
    return ServerCertificate(ca.public_bytes(pem), cert.public_bytes(pem),
                             key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
