"""Issue 37's restarts, quiet spells, forged headers and dropped connections, rows
``restart_revocation``, ``idle_burst``, ``xff_spoof`` and ``db_connection_killed`` of
``make bench-integrity``, each on a platform whose market runs on SQLite and one on PostgreSQL.

- ``restart_revocation``: four tokens made dead four ways (rotated, self-revoked, reissued by
  the operator, the client revoked), the platform stopped and started again on the same workdir
  (a new Redis key prefix); caught when every API refuses each (401/403). Twice per database.
- ``idle_burst``: each API quiet for longer than the revocation list's staleness bound (1 s
  here), then 100 concurrent reads with a valid token; caught when all are 200. Twice per API.
- ``xff_spoof``: 15 enrolment-code guesses from one peer under a rotating ``X-Forwarded-For``
  (caught when the limit answers 429 after 10), and guesses claiming a victim's address followed
  by the victim's own registration from that address (caught when it is 201). Twice each.
- ``db_connection_killed``: an honest round whose declarations, purchases and settlement meet
  every connection of the market's PostgreSQL database terminated every half second
  (``pg_terminate_backend``, from the quote to the round's end); caught when the round
  ends published or settled by rule and no participant is booked other than quoted. Twice, on
  PostgreSQL only (an embedded SQLite database has no connection to drop).

Any 5xx answer is a miss. The honest rounds count as honest participant-rounds. The killed
connections run after the other rows: a connection the pool still holds after a kill answers
its next request 503 with ``Retry-After`` (nothing booked; the SDK retries it), which an
``idle_burst`` try after them would count as a miss.
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx

from benchmarks.integrity import money
from benchmarks.integrity.money import OPERATOR, Attack, MoneyPlatform
from benchmarks.integrity.suite import SuiteResult
from mots.local.agents import Agent, register_population

PG_ADMIN = "postgresql://postgres@127.0.0.1:5432/postgres"
READS = {"market": "/v1/me", "pricing": "/v1/mechanisms", "orchestration": "/v1/rounds"}
KIND = {"name": "type-1", "data_size": 50, "cost": "0.5"}
QUICK_LIST = {"MOTS_REVOCATION_REFRESH_S": "0.2", "MOTS_REVOCATION_MAX_STALE_S": "1"}
VICTIM = "127.0.0.2"
TRIES = 2


@contextmanager
def market_database(kind: str) -> Iterator[dict[str, str]]:
    """The market's database: SQLite (the launcher's file), or a fresh PostgreSQL one."""
    if kind == "sqlite":
        yield {}
        return
    import psycopg

    name = f"mots_durability_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield {"market": f"postgresql+psycopg://postgres@127.0.0.1:5432/{name}"}
    finally:
        with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _dead_tokens(p: MoneyPlatform) -> dict[str, int]:
    """Four tokens made dead four ways: token → the status every API must answer it."""
    a, b, c, d = register_population(p.market, [{**KIND, "count": 4}], money.OPERATOR_TOKEN)
    p.market.post("/v1/me/token", headers=a.auth).raise_for_status()
    p.market.delete("/v1/me/token", headers=b.auth).raise_for_status()
    p.market.post(f"/v1/clients/{c.id}/token", headers=OPERATOR).raise_for_status()
    p.market.delete(f"/v1/clients/{d.id}", headers=OPERATOR).raise_for_status()
    return {a.token: 401, b.token: 401, c.token: 401, d.token: 403}


def restart_revocation(
    p: MoneyPlatform, workdir: Path, urls: dict[str, str], out: Attack
) -> MoneyPlatform:
    """Dead tokens, a restart of the whole platform, every API asked: the restarted platform."""
    dead = _dead_tokens(p)
    money.stop(p)
    p = money.start(workdir, urls, **QUICK_LIST)
    for token, status in dead.items():
        answers = [
            p.api(api).get(path, headers={"Authorization": f"Bearer {token}"}).status_code
            for api, path in READS.items()
        ]
        out.record(answers == [status] * 3, f"after a restart: {answers}, not {status}")
    return p


async def _burst(url: str, token: str, n: int) -> Counter[int]:
    limits = httpx.Limits(max_connections=n)
    async with httpx.AsyncClient(timeout=60, limits=limits) as http:
        answers = await asyncio.gather(
            *(http.get(url, headers={"Authorization": f"Bearer {token}"}) for _ in range(n))
        )
    return Counter(r.status_code for r in answers)


def idle_burst(p: MoneyPlatform, agent: Agent, out: Attack) -> None:
    """Each API quiet past the staleness bound, then 100 concurrent reads: all 200."""
    for api, path in READS.items():
        time.sleep(1.5)
        answers = asyncio.run(_burst(str(p.api(api).base_url).rstrip("/") + path, agent.token, 100))
        out.record(answers == Counter({200: 100}), f"{api}: {dict(answers)}")


def _guess(http: httpx.Client, forwarded: str) -> int:
    body = {"name": "guess", "enrolment_code": f"guess-{random.getrandbits(64):x}"}
    return http.post("/v1/clients", json=body, headers={"X-Forwarded-For": forwarded}).status_code


def xff_spoof(p: MoneyPlatform, attacker: str, out: Attack) -> None:
    """From loopback address ``attacker`` (the suite's own calls come from 127.0.0.1, which the
    guesses must not throttle): a rotating X-Forwarded-For meets the limit; a spoofed victim
    address leaves the victim alone."""
    base = str(p.market.base_url)
    transport = httpx.HTTPTransport(local_address=attacker)
    with httpx.Client(base_url=base, transport=transport, timeout=30) as http:
        answers = [_guess(http, f"10.9.{random.randrange(256)}.{i + 1}") for i in range(15)]
        spoofed = [_guess(http, VICTIM) for _ in range(15)]
    out.record(
        answers.count(401) <= 10 and answers[-1] == 429, f"rotating header: {Counter(answers)}"
    )
    code = p.market.post(
        "/v1/enrolments",
        json={"type_name": KIND["name"], "data_size": 50, "cost": "0.5", "uses": 1, "ttl_s": 600},
        headers=OPERATOR,
    ).raise_for_status()
    transport = httpx.HTTPTransport(local_address=VICTIM)
    with httpx.Client(base_url=base, transport=transport, timeout=30) as victim:
        r = victim.post(
            "/v1/clients", json={"name": "victim", "enrolment_code": code.json()["code"]}
        )
    out.record(
        r.status_code == 201 and 500 not in spoofed, f"the victim: {r.status_code} {r.text[:200]}"
    )
    if r.status_code == 201:
        p.market.delete(f"/v1/clients/{r.json()['id']}", headers=OPERATOR)


@contextmanager
def connections_killed(database_url: str, every_s: float = 0.5) -> Iterator[list[int]]:
    """Terminate every connection to ``database_url``'s database every ``every_s`` seconds while
    the block runs; yields the running count of terminated connections."""
    import psycopg

    name = database_url.rsplit("/", 1)[1]
    killed = [0]
    stop = threading.Event()

    def kill() -> None:
        with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
            while not stop.wait(every_s):
                rows = admin.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE datname = %s AND pid <> pg_backend_pid()",
                    (name,),
                ).fetchall()
                killed[0] += sum(1 for (done,) in rows if done)

    thread = threading.Thread(target=kill, daemon=True)
    thread.start()
    try:
        yield killed
    finally:
        stop.set()
        thread.join(timeout=10)


def _balances(p: MoneyPlatform, agents: list[Agent]) -> dict[int, Decimal]:
    """Each agent's wallet, read as the SDK reads: a 503 (a pooled connection found dropped;
    ``Retry-After``, nothing booked) retried, any other failure raised."""
    out = {}
    for a in agents:
        for _ in range(20):
            r = p.market.get("/v1/me/balance", headers=a.auth)
            if r.status_code != 503:
                break
            time.sleep(float(r.headers.get("Retry-After", "1")) / 4)
        out[a.id] = Decimal(r.raise_for_status().json()["balance"])
    return out


def db_connection_killed(p: MoneyPlatform, database_url: str, out: Attack) -> tuple[int, int]:
    """An honest round (every client best-responds to the quote) whose declarations, purchases
    and the orchestration's polls meet terminated connections; the wallets are read before and
    after (a read that meets a connection killed a moment before is answered 503 with
    ``Retry-After`` and retried, as the SDK does): (participants, booked other than quoted)."""
    from mots.economics.utility import PowerUtility
    from mots.local.agents import choose
    from mots.platform.api.base import Strategy

    utility = PowerUtility.model_validate(money.UTILITY)
    before = _balances(p, p.honest)
    from mots.local.agents import act, wait_for_quote

    r = p.orchestration.post("/v1/rounds", headers=OPERATOR).raise_for_status()
    round_id = int(r.json()["round_id"])
    quote = wait_for_quote(p.market, p.honest[0], round_id)
    choices = choose(p.honest, quote, utility)
    with connections_killed(database_url) as killed:  # during declarations and purchases
        try:
            act(p.market, p.honest, round_id, choices)
            body = money.wait_terminal(p, round_id)
        except (httpx.HTTPError, TimeoutError) as exc:
            out.record(False, f"the round did not end: {exc}")
            return 0, 0
    after = _balances(p, p.honest)
    quoted = {t.type_name: t.reward for t in quote.types}
    joined = [a for a in p.honest if choices[a.id] == Strategy.JOIN]
    flagged = sum(1 for a in joined if after[a.id] - before[a.id] != quoted[a.type_name])
    ended = body["state"] in {"published", "settled_by_rule"}
    out.record(
        ended and flagged == 0,
        f"round {body['id']} {body['state']}, {flagged} booked other than quoted,"
        f" {killed[0]} connections killed",
    )
    out.extra.append({"round_id": body["id"], "state": body["state"], "killed": killed[0]})
    return len(joined), flagged


def run_on(kind: str, workdir: Path, result: SuiteResult) -> None:
    """Every row on one database kind, each tried :data:`TRIES` times; the ledger checked."""
    rows = {n: Attack() for n in ("restart_revocation", "idle_burst", "xff_spoof")}
    rows["db_connection_killed"] = Attack()
    with market_database(kind) as urls:
        p = money.start(workdir, urls, **QUICK_LIST)
        try:
            (agent,) = register_population(p.market, [{**KIND, "count": 1}], money.OPERATOR_TOKEN)
            for i in range(TRIES):
                idle_burst(p, agent, rows["idle_burst"])
                xff_spoof(p, f"127.0.0.{3 + i}", rows["xff_spoof"])
            for _ in range(TRIES if urls else 0):  # after the others: see the module's note
                joined, flagged = db_connection_killed(
                    p, urls["market"], rows["db_connection_killed"]
                )
                result.honest_rounds += joined
                result.honest_flagged += flagged
            for _ in range(TRIES):
                p = restart_revocation(p, workdir, urls, rows["restart_revocation"])
            balanced = money.ledger_balanced(p)
            result.ledger_balanced = balanced and result.ledger_balanced is not False
        finally:
            money.stop(p)
    for name, attack in rows.items():
        merged = result.attacks.setdefault(name, {"tried": 0, "refused_or_caught": 0, "paid": "0"})
        merged["tried"] += attack.tried
        merged["refused_or_caught"] += attack.refused_or_caught
        merged["paid"] = str(Decimal(merged["paid"]) + attack.paid)
        merged.setdefault("missed", []).extend(f"{kind}: {d}" for d in attack.details[:5])
        if not merged["missed"]:
            del merged["missed"]
        result.extra.setdefault(kind, {})[name] = attack.as_dict()


def run(workdir: Path, options: dict[str, Any]) -> SuiteResult:
    """Every row on SQLite, then on PostgreSQL (``options["durability_databases"]`` to narrow)."""
    result = SuiteResult("durability")
    for kind in options.get("durability_databases") or ("sqlite", "postgresql"):
        run_on(kind, workdir / kind, result)
    return result
