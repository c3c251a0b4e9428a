"""The market's model-signing key (issue 40 item 5): one ed25519 key per deployment, kept in the
artifact directory (``model-signing-key.pem``, mode 600) beside the models it signs, made the
first time a process needs it. Every API process of a deployment shares the directory, so they
sign with one key; a new deployment (a new artifact directory) has its own."""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import (
    Encoding,
    NoEncryption,
    PrivateFormat,
    load_pem_private_key,
)

KEY_FILE = "model-signing-key.pem"


@lru_cache(maxsize=8)
def signing_key(artifact_dir: str) -> Ed25519PrivateKey:
    """The deployment's key from ``artifact_dir``, created there (mode 600) when absent; of two
    processes creating it at once, the second reads the first's (a hard link never replaces)."""
    path = Path(artifact_dir) / KEY_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists():
        pem = Ed25519PrivateKey.generate().private_bytes(
            Encoding.PEM, PrivateFormat.PKCS8, NoEncryption()
        )
        tmp = path.with_name(f".{KEY_FILE}.{os.getpid()}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(pem)
        try:
            os.link(tmp, path)  # atomic, and never over another process's key
        except FileExistsError:
            pass
        finally:
            tmp.unlink()
    key = load_pem_private_key(path.read_bytes(), password=None)
    if not isinstance(key, Ed25519PrivateKey):
        raise ValueError(f"{path}: not an ed25519 private key")
    return key
