"""Key material of an authenticated, encrypted Flower federation (TLS and SuperNode keys).

The SuperLink serves TLS with a certificate signed by a certificate authority (CA) whose
certificate every SuperNode and the orchestration trust (``--root-certificates``); each SuperNode
holds its own EC key pair (NIST P-384, the curve Flower 1.42 generates) and signs every Fleet API
request with the private key, and the SuperLink only admits public keys registered through its
Control API (``--enable-supernode-auth``). Nothing here is committed: a local federation makes a
CA, a server certificate and one key pair per SuperNode in its work directory for each run; a
deployment reads them from Secrets or makes them on first start (``python -m mots.training.pki``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import ipaddress
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CERT_DAYS = 825
"""Validity of a server certificate (the longest browsers accept; the CA lives ten years)."""


@dataclass(frozen=True)
class TlsFiles:
    """Where the SuperLink's TLS material lies: CA certificate, server certificate and key."""

    ca_cert: Path
    server_cert: Path
    server_key: Path

    def superlink_args(self) -> list[str]:
        """``flower-superlink`` arguments that turn TLS on with these files."""
        return [
            "--ssl-ca-certfile",
            str(self.ca_cert),
            "--ssl-certfile",
            str(self.server_cert),
            "--ssl-keyfile",
            str(self.server_key),
        ]


@dataclass(frozen=True)
class NodeKey:
    """One SuperNode's key pair on disk and its public key as the SuperLink registers it."""

    private_key: Path
    public_key: Path
    public_pem: bytes

    @property
    def fingerprint(self) -> str:
        """SHA-256 of the public key (PEM SubjectPublicKeyInfo), hex: a short stable name."""
        return fingerprint(self.public_pem)


def fingerprint(public_pem: bytes) -> str:
    """SHA-256 (hex) of a public key in PEM SubjectPublicKeyInfo form."""
    return hashlib.sha256(public_pem.strip()).hexdigest()


def write_private(path: Path, data: bytes, *, replace: bool = True) -> None:
    """Write ``data`` readable by its owner only (created 0600, never world-readable);
    ``replace=False`` raises FileExistsError when ``path`` exists."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if replace:
        path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def _name(common_name: str) -> x509.Name:
    return x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "MoTS federation"),
            x509.NameAttribute(NameOID.COMMON_NAME, common_name),
        ]
    )


def _san(hosts: Sequence[str]) -> x509.SubjectAlternativeName:
    names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    return x509.SubjectAlternativeName(names)


def make_tls(directory: Path, hosts: Sequence[str], common_name: str = "superlink") -> TlsFiles:
    """A fresh CA and a server certificate for ``hosts`` (DNS names or IP addresses) in
    ``directory``: ``ca.crt``, ``server.crt``, ``server.key`` (0600); the CA's key is not kept."""
    if not hosts:
        raise ValueError("hosts: name at least one DNS name or IP address of the SuperLink")
    now = dt.datetime.now(dt.UTC)
    ca_key = ec.generate_private_key(ec.SECP384R1())
    ca_name = _name("MoTS federation CA")
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=3650))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=False,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .sign(ca_key, hashes.SHA384())
    )
    key = ec.generate_private_key(ec.SECP384R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=CERT_DAYS))
        .add_extension(_san(hosts), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA384())
    )
    directory.mkdir(parents=True, exist_ok=True)
    files = TlsFiles(directory / "ca.crt", directory / "server.crt", directory / "server.key")
    files.ca_cert.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    files.server_cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    write_private(
        files.server_key,
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ),
    )
    return files


def make_node_key(private_key: Path, *, replace: bool = True) -> NodeKey:
    """A fresh SuperNode key pair: the OpenSSH private key at ``private_key`` (0600, what
    ``flower-supernode --auth-supernode-private-key`` reads) and its ``.pub`` beside it.
    ``replace=False`` raises FileExistsError instead of replacing an existing key."""
    key = ec.generate_private_key(ec.SECP384R1())
    write_private(
        private_key,
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.OpenSSH,
            serialization.NoEncryption(),
        ),
        replace=replace,
    )
    public = private_key.with_name(private_key.name + ".pub")
    public.write_bytes(
        key.public_key().public_bytes(
            serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
        )
        + b"\n"
    )
    return NodeKey(private_key, public, public_pem(key.public_key()))


def load_node_key(private_key: Path) -> NodeKey:
    """The key pair at ``private_key`` (an OpenSSH EC private key), e.g. one made on the device."""
    key = serialization.load_ssh_private_key(private_key.read_bytes(), None)
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise ValueError(f"{private_key}: expected an EC private key (NIST P-384), got {type(key)}")
    return NodeKey(
        private_key, private_key.with_name(private_key.name + ".pub"), public_pem(key.public_key())
    )


def ensure_node_key(private_key: Path) -> NodeKey:
    """The key pair at ``private_key``, made there first if absent (a device's first start; when
    the SuperNode and the agent start together, the one that loses the race loads the other's)."""
    if private_key.is_file():
        return load_node_key(private_key)
    try:
        return make_node_key(private_key, replace=False)
    except FileExistsError:
        return load_node_key(private_key)


def public_pem(key: ec.EllipticCurvePublicKey) -> bytes:
    """A public key as the SuperLink's Control API registers it (PEM SubjectPublicKeyInfo)."""
    return key.public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def public_pem_from_text(text: str | bytes) -> bytes:
    """PEM SubjectPublicKeyInfo of an EC public key given as PEM or OpenSSH text; ValueError
    names the rule when it is neither, or not on a NIST curve Flower accepts."""
    raw = text.encode() if isinstance(text, str) else text
    raw = raw.strip()
    try:
        key = (
            serialization.load_pem_public_key(raw)
            if raw.startswith(b"-----BEGIN")
            else serialization.load_ssh_public_key(raw)
        )
    except (ValueError, TypeError, UnsupportedAlgorithm) as err:
        raise ValueError(
            f"public_key: expected an EC public key in PEM or OpenSSH form ({err})"
        ) from err
    if not isinstance(key, ec.EllipticCurvePublicKey) or not isinstance(
        key.curve, ec.SECP256R1 | ec.SECP384R1 | ec.SECP521R1
    ):
        raise ValueError("public_key: must be an EC key on NIST P-256, P-384 or P-521")
    return public_pem(key)


def ensure_tls(directory: Path, hosts: Sequence[str]) -> TlsFiles:
    """The TLS files in ``directory``, made on first start when absent (a Secret may hold them)."""
    files = TlsFiles(directory / "ca.crt", directory / "server.crt", directory / "server.key")
    if files.ca_cert.is_file() and files.server_cert.is_file() and files.server_key.is_file():
        return files
    return make_tls(directory, hosts)


def main(argv: list[str] | None = None) -> None:
    """``python -m mots.training.pki tls DIR --host H …`` or ``… node-key PATH``: make (if
    absent) and print where the files are, or a node's public key (PEM) to register."""
    p = argparse.ArgumentParser(description="MoTS federation key material")
    sub = p.add_subparsers(dest="cmd", required=True)
    tls = sub.add_parser("tls", help="CA + SuperLink server certificate (kept if present)")
    tls.add_argument("directory", type=Path)
    tls.add_argument("--host", action="append", required=True, help="DNS name or IP (repeat)")
    node = sub.add_parser("node-key", help="a SuperNode key pair (kept if present)")
    node.add_argument("path", type=Path)
    args = p.parse_args(argv)
    if args.cmd == "tls":
        files = ensure_tls(args.directory, args.host)
        print(files.ca_cert, files.server_cert, files.server_key)
    else:
        print(ensure_node_key(args.path).public_pem.decode(), end="")


if __name__ == "__main__":
    main()
