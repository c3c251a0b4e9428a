"""The secrets of a platform on one machine (operator token, token HMAC key): generated, never
built in (issue 24). `mots platform up` keeps a workdir's in ``WORKDIR/secrets.env`` (mode 600,
reused at the next start so that issued client tokens stay valid); the demo, the benchmarks and
a :class:`mots.local.launcher.Stack` use this process's (:func:`process_secrets`)."""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass
from pathlib import Path

SECRETS_FILE = "secrets.env"


@dataclass(frozen=True, slots=True)
class PlatformSecrets:
    """A platform's operator token and the key its services sign client tokens with."""

    operator_token: str
    token_secret: str

    @property
    def env(self) -> dict[str, str]:
        """The two as the services' environment variables."""
        return {"MOTS_OPERATOR_TOKEN": self.operator_token, "MOTS_TOKEN_SECRET": self.token_secret}


def generate() -> PlatformSecrets:
    """Fresh random secrets (256 bits for the token, 384 for the key)."""
    return PlatformSecrets("op_" + secrets.token_urlsafe(32), secrets.token_urlsafe(48))


def write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` readable by its owner only (mode 600), atomically."""
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, text.encode())
    finally:
        os.close(fd)
    tmp.replace(path)


def workdir_secrets(workdir: Path) -> tuple[PlatformSecrets, bool]:
    """The workdir's secrets, read from ``secrets.env`` or generated into it; and whether they
    were generated now (the only time `mots platform up` shows the operator token)."""
    path = workdir / SECRETS_FILE
    if path.exists():
        values = dict(line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)
        os.chmod(path, 0o600)
        return PlatformSecrets(values["MOTS_OPERATOR_TOKEN"], values["MOTS_TOKEN_SECRET"]), False
    made = generate()
    workdir.mkdir(parents=True, exist_ok=True)
    write_private(path, "".join(f"{k}={v}\n" for k, v in made.env.items()))
    return made, True


def process_secrets() -> PlatformSecrets:
    """This process's secrets: ``MOTS_OPERATOR_TOKEN`` and ``MOTS_TOKEN_SECRET`` from its
    environment, else fresh ones put there (the processes it starts inherit them)."""
    op, key = os.environ.get("MOTS_OPERATOR_TOKEN"), os.environ.get("MOTS_TOKEN_SECRET")
    if op and key:
        return PlatformSecrets(op, key)
    made = generate()
    os.environ.update(made.env)
    return made
