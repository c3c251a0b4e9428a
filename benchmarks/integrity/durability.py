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
- ``db_connection_killed``: an honest round that meets every connection to the platform's
  PostgreSQL databases terminated every half second (``pg_terminate_backend``), from before the
  operator opens it to its end: its opening, collection, close, training, evaluation and
  settlement; caught when the round publishes and every participant is booked exactly its quote.
  The orchestration's database is on PostgreSQL in both suites, so the row runs on both: with
  the market's ledger on SQLite only the orchestration's connections drop (an embedded SQLite
  database has none), with it on PostgreSQL both services' do. Twice per database.

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
from collections.abc import Callable, Iterator
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
    """The services' databases: the market's SQLite (the launcher's file) or a fresh PostgreSQL
    one, and a fresh PostgreSQL one for the orchestration either way (its connections are what
    ``db_connection_killed`` drops beside the market's)."""
    import psycopg

    services = ("orchestration", "market") if kind == "postgresql" else ("orchestration",)
    names = {s: f"mots_durability_{s[:4]}_{uuid.uuid4().hex[:8]}" for s in services}
    with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
        for name in names.values():
            admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield {s: f"postgresql+psycopg://postgres@127.0.0.1:5432/{n}" for s, n in names.items()}
    finally:
        with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
            for name in names.values():
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


def _round_state(orchestration_url: str) -> str:
    """The newest round's state in the orchestration's database ("opening" before there is one)."""
    import psycopg

    with psycopg.connect(orchestration_url.replace("+psycopg", ""), autocommit=True) as conn:
        row = conn.execute("SELECT state FROM rounds ORDER BY id DESC LIMIT 1").fetchone()
    return "opening" if row is None or row[0] in TERMINAL else str(row[0])


TERMINAL = {"published", "settled_by_rule"}


@contextmanager
def connections_killed(urls: dict[str, str], every_s: float = 0.5) -> Iterator[Counter[str]]:
    """Terminate every connection to the databases of ``urls`` (service → URL) every
    ``every_s`` seconds while the block runs; yields the terminated connections counted by the
    round's state when they were (read from the orchestration's database just before)."""
    import psycopg

    names = [url.rsplit("/", 1)[1] for url in urls.values()]
    killed: Counter[str] = Counter()
    stop = threading.Event()

    def kill() -> None:
        with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
            while not stop.wait(every_s):
                state = _round_state(urls["orchestration"])
                rows = admin.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE datname = ANY(%s) AND pid <> pg_backend_pid()",
                    (names,),
                ).fetchall()
                killed[state] += sum(1 for (done,) in rows if done)

    thread = threading.Thread(target=kill, daemon=True)
    thread.start()
    try:
        yield killed
    finally:
        stop.set()
        thread.join(timeout=10)


def _answered(call: Callable[[], httpx.Response], tries: int = 20) -> httpx.Response:
    """``call``'s answer, a 503 (a connection found dropped; ``Retry-After``, nothing done)
    retried as the SDK retries it; any other failure raised."""
    for _ in range(tries):
        r = call()
        if r.status_code != 503:
            break
        time.sleep(float(r.headers.get("Retry-After", "1")) / 4)
    return r.raise_for_status()


def _balances(p: MoneyPlatform, agents: list[Agent]) -> dict[int, Decimal]:
    """Each agent's wallet, read as the SDK reads (:func:`_answered`)."""
    return {
        a.id: Decimal(
            _answered(lambda a=a: p.market.get("/v1/me/balance", headers=a.auth)).json()["balance"]
        )
        for a in agents
    }


def _terminal(p: MoneyPlatform, round_id: int, timeout_s: float = money.ROUND_TIMEOUT_S) -> Any:
    """:func:`money.wait_terminal` with the operator's reads retried on a 503."""
    deadline = time.monotonic() + timeout_s
    while True:
        body = _answered(lambda: p.orchestration.get(f"/v1/rounds/{round_id}")).json()
        if body["state"] in TERMINAL:
            return body
        if time.monotonic() > deadline:
            raise TimeoutError(f"round {round_id} still {body['state']} after {timeout_s}s")
        time.sleep(0.5)


def db_connection_killed(p: MoneyPlatform, urls: dict[str, str], out: Attack) -> tuple[int, int]:
    """An honest round (every client best-responds to the quote) whose every stage meets
    terminated connections (:func:`connections_killed`, from before the opening); the wallets are
    read before and after: (participants, booked other than quoted)."""
    from mots.economics.utility import PowerUtility
    from mots.local.agents import act, choose, wait_for_quote
    from mots.platform.api.base import Strategy

    utility = PowerUtility.model_validate(money.UTILITY)
    before = _balances(p, p.honest)
    with connections_killed(urls) as killed:
        try:
            opened = _answered(lambda: p.orchestration.post("/v1/rounds", headers=OPERATOR))
            round_id = int(opened.json()["round_id"])
            quote = wait_for_quote(p.market, p.honest[0], round_id)
            choices = choose(p.honest, quote, utility)
            act(p.market, p.honest, round_id, choices)
            body = _terminal(p, round_id)
        except (httpx.HTTPError, TimeoutError) as exc:
            out.record(False, f"the round did not end: {exc}")
            return 0, 0
    after = _balances(p, p.honest)
    quoted = {t.type_name: t.reward for t in quote.types}
    joined = [a for a in p.honest if choices[a.id] == Strategy.JOIN]
    flagged = sum(1 for a in joined if after[a.id] - before[a.id] != quoted[a.type_name])
    out.record(
        body["state"] == "published" and flagged == 0,
        f"round {body['id']} {body['state']} ({body.get('rule')}), {flagged} booked other than"
        f" quoted, connections killed by stage {dict(killed)}",
    )
    out.extra.append({"round_id": body["id"], "state": body["state"], "killed": dict(killed)})
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
            for _ in range(TRIES):  # after the others: see the module's note
                joined, flagged = db_connection_killed(p, urls, rows["db_connection_killed"])
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
