"""Attacks on the platform's secrets and on tokens that should be dead (issue 24, point 4), in the
money suite's registry (:data:`benchmarks.integrity.money.ATTACKS`).

- ``default_secret_forgery``: against a platform started by the real ``mots platform up
  --free-ports`` (its own workdir and Redis keys): the public development operator token on an
  operator route of each API, and tokens signed with the public development key for a client
  that exists and for one that does not (valid 50 years) on each API; caught when every one is
  401, and the workdir's secrets file is private (mode 600) and holds neither public value.
- ``revoked_token_everywhere``: on the suite's platform, tokens made dead four ways (the client
  rotated it, revoked it itself, the operator reissued it, the operator revoked the client);
  caught when the market, pricing and orchestration all refuse it within 5 s, each with the
  problem code of how it died (401 token-rotated or token-revoked; 403 client-revoked).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from benchmarks.integrity.money import OPERATOR, Attack, MoneyPlatform, attack, stack_env
from mots.local.agents import register_population
from mots.platform import tokens
from mots.platform.settings import DEV_OPERATOR_TOKEN, DEV_TOKEN_SECRET

REVOCATION_BOUND_S = 5.0
"""How soon every service must refuse a dead token (issue 24)."""
_SECRET_VARS = ("MOTS_OPERATOR_TOKEN", "MOTS_TOKEN_SECRET", "MOTS_ENVIRONMENT")


def _platform_up(workdir: Path) -> tuple[subprocess.Popen[bytes], dict[str, Any]]:
    """``mots platform up --free-ports`` in ``workdir`` with no secret in its environment;
    the process and its endpoints once they are written."""
    env = {k: v for k, v in {**os.environ, **stack_env()}.items() if k not in _SECRET_VARS}
    log = (workdir / "up.log").open("ab")
    cmd = [str(Path(sys.executable).parent / "mots"), "platform", "up", "--workdir", str(workdir)]
    up = subprocess.Popen(
        [*cmd, "--free-ports", "--no-prometheus"],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    log.close()
    deadline = time.monotonic() + 240
    endpoints = workdir / "endpoints.json"
    while not endpoints.exists():
        if up.poll() is not None or time.monotonic() > deadline:
            _down(up)
            tail = (workdir / "up.log").read_text(errors="replace")[-2000:]
            raise RuntimeError(f"mots platform up did not start:\n{tail}")
        time.sleep(0.5)
    time.sleep(0.2)
    return up, json.loads(endpoints.read_text())


def _down(up: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(up.pid, signal.SIGTERM)
    try:
        up.wait(timeout=60)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(up.pid, signal.SIGKILL)
        up.wait()


def _private_secrets(workdir: Path) -> bool:
    """Every file of the workdir that holds a secret is mode 600 and holds no public value."""
    files = [workdir / "secrets.env", workdir / "endpoints.json"]
    for f in files:
        if not f.exists() or f.stat().st_mode & 0o777 != 0o600:
            return False
        text = f.read_text()
        if DEV_OPERATOR_TOKEN in text or DEV_TOKEN_SECRET in text:
            return False
    return True


@attack("default_secret_forgery")
def default_secret_forgery(p: MoneyPlatform) -> Attack:
    """The public development secrets against a platform `mots platform up` started: 401s."""
    out = Attack()
    workdir = p.stack.workdir.parent / "platform-up"
    workdir.mkdir(parents=True, exist_ok=True)
    up, endpoints = _platform_up(workdir)
    try:
        real = {"Authorization": f"Bearer {endpoints['operator_token']}"}
        with httpx.Client(timeout=30) as http:
            r = http.post(
                f"{endpoints['market']}/v1/clients",
                json={"name": "c1", "type_name": "t", "data_size": 50, "cost": "1"},
                headers=real,
            )
            existing = int(r.json()["id"]) if r.status_code == 201 else 1
            far = int(time.time()) + 50 * 365 * 86_400
            forged = [tokens.sign(cid, far, DEV_TOKEN_SECRET) for cid in (existing, 999_999)]
            tries = [
                ("market", "GET", "/v1/clients", DEV_OPERATOR_TOKEN),
                ("orchestration", "GET", "/v1/rounds", DEV_OPERATOR_TOKEN),
                ("pricing", "GET", "/v1/mechanisms", DEV_OPERATOR_TOKEN),
            ]
            for token in forged:
                tries += [
                    ("market", "GET", "/v1/me", token),
                    ("pricing", "GET", "/v1/mechanisms", token),
                    ("orchestration", "GET", "/v1/rounds", token),
                ]
            for service, method, path, token in tries:
                r = http.request(
                    method, endpoints[service] + path, headers={"Authorization": f"Bearer {token}"}
                )
                out.record(r.status_code == 401, f"{service} {path} {token[:24]}…: {r.status_code}")
        out.record(_private_secrets(workdir), "the workdir's secrets are not private")
    finally:
        _down(up)
    return out


def _refused_everywhere(p: MoneyPlatform, token: str, code: str) -> float | None:
    """Seconds until the market, pricing and orchestration all refuse ``token`` with problem
    ``code`` (401 for a dead token, 403 for a revoked client: docs/errors.md), polled every
    0.1 s up to twice the bound; None if some service still admits it by then."""
    start = time.monotonic()
    headers = {"Authorization": f"Bearer {token}"}
    routes = [(p.market, "/v1/me"), (p.pricing, "/v1/mechanisms"), (p.orchestration, "/v1/rounds")]
    while time.monotonic() - start < 2 * REVOCATION_BOUND_S:
        answers = [c.get(path, headers=headers) for c, path in routes]
        if all(r.status_code in (401, 403) and r.json().get("code") == code for r in answers):
            return time.monotonic() - start
        time.sleep(0.1)
    return None


@attack("revoked_token_everywhere")
def revoked_token_everywhere(p: MoneyPlatform) -> Attack:
    """Rotated, self-revoked, reissued and revoked-client tokens: refused on every API within
    5 s, each with its own problem code (token-rotated, token-revoked; client-revoked, 403)."""
    out = Attack()
    kind = {"name": "type-1", "count": 4, "data_size": 50, "cost": "0.5"}
    agents = register_population(p.market, [kind], OPERATOR["Authorization"][7:], "1")
    try:
        dead: list[tuple[str, str, str]] = []
        a = agents[0]
        p.market.post("/v1/me/token", headers=a.auth).raise_for_status()
        dead.append(("rotated by the client", a.token, "token-rotated"))
        b = agents[1]
        p.market.delete("/v1/me/token", headers=b.auth).raise_for_status()
        dead.append(("revoked by the client", b.token, "token-revoked"))
        c = agents[2]
        p.market.post(f"/v1/clients/{c.id}/token", headers=OPERATOR).raise_for_status()
        dead.append(("reissued by the operator", c.token, "token-rotated"))
        d = agents[3]
        p.market.delete(f"/v1/clients/{d.id}", headers=OPERATOR).raise_for_status()
        dead.append(("client revoked by the operator", d.token, "client-revoked"))
        for what, token, code in dead:
            took = _refused_everywhere(p, token, code)
            caught = took is not None and took <= REVOCATION_BOUND_S
            out.record(caught, f"{what}: refused everywhere after {took} s")
            out.extra.append({"how": what, "refused_everywhere_after_s": took})
    finally:
        for agent in agents:  # out of the priced population: later rounds do not wait for them
            p.market.delete(f"/v1/clients/{agent.id}", headers=OPERATOR)
    return out


def _proof(p: MoneyPlatform, auth: dict[str, str], private_key: Path) -> dict[str, str]:
    """A proof of possession: the caller's own challenge signed with ``private_key``."""
    from mots.platform.node_proof import sign_challenge

    r = p.market.post("/v1/me/node-key/challenge", headers=auth)
    challenge = str(r.json().get("challenge", "")) if r.is_success else "none"
    return {"challenge": challenge, "signature": sign_challenge(private_key, challenge)}


@attack("node_key_squat")
def node_key_squat(p: MoneyPlatform) -> Attack:
    """Registering another device's SuperNode public key first: with no proof, with the owner's
    proof replayed, with a signature by the squatter's own key, and with garbage; caught when each
    is refused (4xx) and the owner then registers its key (not 409)."""
    import tempfile

    from mots.training.pki import make_node_key

    out = Attack()
    kind = {"name": "type-1", "count": 2, "data_size": 50, "cost": "0.5"}
    owner, squatter = register_population(p.market, [kind], OPERATOR["Authorization"][7:], "1")
    try:
        with tempfile.TemporaryDirectory() as tmp:
            victim = make_node_key(Path(tmp) / "victim")
            own = make_node_key(Path(tmp) / "squatter")
            public = victim.public_pem.decode()
            replayed = _proof(p, owner.auth, victim.private_key)
            tries = [
                ("no proof", {"public_key": public}),
                ("the owner's proof replayed", {"public_key": public, **replayed}),
                (
                    "signed by the squatter's key",
                    {"public_key": public, **_proof(p, squatter.auth, own.private_key)},
                ),
                ("garbage", {"public_key": public, "challenge": "x" * 40, "signature": "AAAA"}),
            ]
            for what, body in tries:
                r = p.market.put("/v1/me/node-key", json=body, headers=squatter.auth)
                out.record(400 <= r.status_code < 500, f"{what}: {r.status_code}")
            body = {"public_key": public, **_proof(p, owner.auth, victim.private_key)}
            r = p.market.put("/v1/me/node-key", json=body, headers=owner.auth)
            out.record(r.status_code == 200, f"the owner registering its key: {r.status_code}")
    finally:
        for agent in (owner, squatter):
            p.market.delete(f"/v1/clients/{agent.id}", headers=OPERATOR)
    return out
