"""Key material: a CA-signed server certificate a TLS client accepts, SuperNode key pairs."""

from __future__ import annotations

import ssl
import stat
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from mots.training import pki


def test_tls_files_verify_and_keep_the_key_private(tmp_path: Path) -> None:
    """The server certificate chains to the CA and names the hosts; the key is 0600."""
    files = pki.make_tls(tmp_path / "tls", ["127.0.0.1", "superlink-fleet.mots.svc"])
    ctx = ssl.create_default_context(cafile=str(files.ca_cert))
    ctx.load_verify_locations(cafile=str(files.ca_cert))
    cert = x509.load_pem_x509_certificate(files.server_cert.read_bytes())
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "superlink-fleet.mots.svc" in san.get_values_for_type(x509.DNSName)
    assert [str(a) for a in san.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    ca = x509.load_pem_x509_certificate(files.ca_cert.read_bytes())
    cert.verify_directly_issued_by(ca)
    assert stat.S_IMODE(files.server_key.stat().st_mode) == 0o600
    assert files.superlink_args()[0] == "--ssl-ca-certfile"
    again = pki.ensure_tls(tmp_path / "tls", ["ignored"])  # kept when present
    assert again.server_cert.read_bytes() == files.server_cert.read_bytes()
    with pytest.raises(ValueError, match="hosts"):
        pki.make_tls(tmp_path / "x", [])


def test_node_keys_round_trip_and_foreign_keys_are_refused(tmp_path: Path) -> None:
    """A node key (OpenSSH, 0600) loads back to the same public key, in PEM or OpenSSH text;
    an RSA key is not one Flower registers."""
    key = pki.ensure_node_key(tmp_path / "node" / "supernode.key")
    assert stat.S_IMODE(key.private_key.stat().st_mode) == 0o600
    assert pki.load_node_key(key.private_key).public_pem == key.public_pem
    assert pki.ensure_node_key(key.private_key).fingerprint == key.fingerprint
    assert pki.public_pem_from_text(key.public_key.read_text()) == key.public_pem
    assert pki.public_pem_from_text(key.public_pem.decode()) == key.public_pem
    rsa_pub = rsa.generate_private_key(public_exponent=65537, key_size=2048).public_key()
    pem = rsa_pub.public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    with pytest.raises(ValueError, match="NIST"):
        pki.public_pem_from_text(pem)
    with pytest.raises(ValueError, match="public_key"):
        pki.public_pem_from_text("not a key")
