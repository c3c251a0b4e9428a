"""The market's suite of ``make bench-integrity`` (issue 13): money attacks on a fresh platform.

:func:`run` starts the four services (:class:`mots.local.launcher.Stack`, real Redis, Celery
workers, SQLite) and registers an honest funded population, which plays one round at K*
(each participant must be booked exactly its quoted reward; ``honest.flagged`` counts those that
were not) after the attacks of :data:`FRESH_QUOTE` and before every other attack of
:data:`ATTACKS`; then it checks the ledger. An attack is a
function ``(MoneyPlatform) -> Attack``; add one with :func:`attack`. Each reports how often it was tried,
how often the platform refused or contained it, and what it was paid beyond its quote (a
decimal string; "0" when nothing).

- ``quote_overcharge``: two rounds whose realised state is off K* where re-pricing the schedule
  would pay or charge beyond the quote: on each published quote the attacking population asks
  the pricing API for the schedule at candidate deviations (everyone joins; one client, or all
  clients, of a type join while the rest buy) and plays the first whose re-priced rewards lie
  beyond the quote. Contained when, read from the wallets, no participant was paid or charged
  beyond its type's quote, no buyer paid more than the quoted price, the round's subsidy stayed
  within its budget (``MOTS_ROUND_SUBSIDY_BUDGET`` is 1 on this platform, so a cap is exercised)
  and the ledger balances. ``paid`` sums what the wallets moved beyond the quote.
- ``non_finite_json``: every JSON body of every route of every API (from their OpenAPI
  documents) sent with ``NaN``, ``Infinity``, ``-Infinity`` and ``1e400`` in each field; refused
  when answered 4xx as ``application/problem+json`` (never a 5xx, never accepted).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx

from benchmarks.integrity.suite import SuiteResult
from mots.local.agents import Agent, register_population
from mots.local.keys import process_secrets
from mots.local.launcher import SERVICES_WITH_API, Stack
from mots.platform.api.base import TERMINAL_STATES, Strategy
from mots.platform.api.market import QuoteOut

OPERATOR_TOKEN = process_secrets().operator_token
OPERATOR = {"Authorization": f"Bearer {OPERATOR_TOKEN}"}
NON_FINITE = ("NaN", "Infinity", "-Infinity", "1e400")
"""JSON literals Python's parser accepts that no client may send (1e400 overflows to inf)."""
HONEST_TYPES = [
    {"name": "type-1", "count": 4, "data_size": 50, "cost": "0.5"},
    {"name": "type-3", "count": 2, "data_size": 300, "cost": "3.0"},
]
UTILITY = {"kind": "power", "scale": 1.0, "exponent": 8.0}
SUBSIDY_BUDGET = Decimal(1)
"""``MOTS_ROUND_SUBSIDY_BUDGET`` of the suite's platform (small, so that a cap is exercised)."""
ROUND_TIMEOUT_S = 300.0


@dataclass
class Attack:
    """Tries of one attack, how many were refused or contained, and what was paid beyond quotes."""

    tried: int = 0
    refused_or_caught: int = 0
    paid: Decimal = Decimal(0)
    details: list[str] = field(default_factory=list)
    extra: list[dict[str, Any]] = field(default_factory=list)

    def record(self, caught: bool, detail: str = "", paid: Decimal = Decimal(0)) -> None:
        """One try: refused or contained (or not), with what it was paid beyond its quote."""
        self.tried += 1
        self.refused_or_caught += int(caught)
        self.paid += paid
        if detail and not caught:
            self.details.append(detail)

    def as_dict(self) -> dict[str, Any]:
        """The contract's entry (``paid`` a decimal string), with up to 5 misses for reading."""
        out: dict[str, Any] = {
            "tried": self.tried,
            "refused_or_caught": self.refused_or_caught,
            "paid": _decimal_string(self.paid),
        }
        if self.details:
            out["missed"] = self.details[:5]
        if self.extra:
            out["rounds"] = self.extra
        return out


def _decimal_string(x: Decimal) -> str:
    """A canonical decimal string: "0" for zero, no exponent, no trailing zeros."""
    if x == 0:
        return "0"
    return format(x.normalize(), "f")


@dataclass
class MoneyPlatform:
    """A running platform and an honest funded population the attacks may use."""

    stack: Stack
    market: httpx.Client
    pricing: httpx.Client
    orchestration: httpx.Client
    honest: list[Agent]

    def api(self, service: str) -> httpx.Client:
        """The HTTP client of one API by name (``market``, ``pricing``, ``orchestration``)."""
        return {
            "market": self.market,
            "pricing": self.pricing,
            "orchestration": self.orchestration,
        }[service]


AttackFn = Callable[[MoneyPlatform], Attack]
ATTACKS: dict[str, AttackFn] = {}
"""Every money attack by its name in ``out/bench/integrity.json``, in the order they run."""


def attack(name: str) -> Callable[[AttackFn], AttackFn]:
    """Register an attack under its contract name."""

    def register(fn: AttackFn) -> AttackFn:
        if name in ATTACKS:
            raise ValueError(f"attack {name} is registered twice")
        ATTACKS[name] = fn
        return fn

    return register


def stack_env(**extra: str) -> dict[str, str]:
    """Small, fast settings: in-process training of a tiny config, short collection."""
    return {
        "MOTS_TRAINER": "inprocess",
        "MOTS_TRAIN_ROUNDS": "2",
        "MOTS_TRAIN_LOCAL_STEPS": "2",
        "MOTS_TRAIN_TEST_SUBSET": "500",
        "MOTS_EVAL_TEST_SUBSET": "500",
        "MOTS_UTILITY": json.dumps(UTILITY),
        "MOTS_COLLECT_TIMEOUT_S": "30",
        "MOTS_POLL_INTERVAL_S": "0.2",
        "MOTS_ROUND_SUBSIDY_BUDGET": str(SUBSIDY_BUDGET),
        # the error model stays at the prior (a posterior of negligible spread): every round is
        # priced alike, so each attack meets the same quote whatever ran before it
        "MOTS_PRIOR_ERROR_SD": json.dumps({"eps0": 1e-9, "d_gamma2": 1e-9, "sigma2": 1e-9}),
        **extra,
    }


# ------------------------------------------------------------------ rounds


def balances(p: MoneyPlatform, agents: list[Agent]) -> dict[int, Decimal]:
    """Each agent's wallet balance."""
    return {
        a.id: Decimal(
            p.market.get("/v1/me/balance", headers=a.auth).raise_for_status().json()["balance"]
        )
        for a in agents
    }


def ledger_accounts(p: MoneyPlatform) -> dict[str, Decimal]:
    """Σ balances per account category (``platform_subsidy`` goes negative as it pays out)."""
    r = p.market.get("/v1/ledger/check", headers=OPERATOR).raise_for_status().json()
    return {k: Decimal(v) for k, v in r["accounts"].items()}


def wait_terminal(
    p: MoneyPlatform, round_id: int, timeout_s: float = ROUND_TIMEOUT_S
) -> dict[str, Any]:
    """Poll the orchestration API (as the operator) until the round ends; its body."""
    deadline = time.monotonic() + timeout_s
    while True:
        body: dict[str, Any] = (
            p.orchestration.get(f"/v1/rounds/{round_id}", headers=OPERATOR)
            .raise_for_status()
            .json()
        )
        if body["state"] in {s.value for s in TERMINAL_STATES}:
            return body
        if time.monotonic() > deadline:
            raise TimeoutError(f"round {round_id} still {body['state']} after {timeout_s}s")
        time.sleep(0.5)


def play_round(
    p: MoneyPlatform, choose: Callable[[QuoteOut], dict[int, Strategy]]
) -> tuple[QuoteOut, dict[str, Any], dict[int, Strategy]]:
    """Open a round, let the honest agents act as ``choose`` says on its quote, wait for its end."""
    from mots.local.agents import act, wait_for_quote

    r = p.orchestration.post("/v1/rounds", headers=OPERATOR)
    r.raise_for_status()
    round_id = int(r.json()["round_id"])
    quote = wait_for_quote(p.market, p.honest[0], round_id)
    choices = choose(quote)
    act(p.market, p.honest, round_id, choices)
    return quote, wait_terminal(p, round_id), choices


def beyond_quote(
    quote: QuoteOut,
    agents: list[Agent],
    choices: dict[int, Strategy],
    before: dict[int, Decimal],
    after: dict[int, Decimal],
) -> tuple[Decimal, list[str]]:
    """What the wallets moved beyond the quote in one round: a joiner's change must lie between 0
    and its type's quoted reward, a buyer's between −p and 0."""
    quoted = {t.type_name: t.reward for t in quote.types}
    excess = Decimal(0)
    notes = []
    for a in agents:
        delta = after[a.id] - before[a.id]
        if choices[a.id] == Strategy.JOIN:
            lo, hi = (
                min(quoted.get(a.type_name, Decimal(0)), Decimal(0)),
                max(quoted.get(a.type_name, Decimal(0)), Decimal(0)),
            )
        elif choices[a.id] == Strategy.BUY:
            lo, hi = -quote.price, Decimal(0)
        else:
            lo = hi = Decimal(0)
        over = max(Decimal(0), lo - delta, delta - hi)
        if over:
            notes.append(f"client {a.id} ({choices[a.id].value}) moved {delta}, quote [{lo}, {hi}]")
        excess += over
    return excess, notes


def round_scenario(p: MoneyPlatform, round_id: int, timeout_s: float = 60.0) -> dict[str, Any]:
    """The scenario a round was priced on, as the operator reads it (the market may publish the
    quote a moment before the orchestration records the round's move to collecting)."""
    deadline = time.monotonic() + timeout_s
    while True:
        rnd = p.orchestration.get(f"/v1/rounds/{round_id}", headers=OPERATOR)
        scenario: dict[str, Any] | None = rnd.raise_for_status().json()["scenario"]
        if scenario is not None:
            return scenario
        if time.monotonic() > deadline:
            raise TimeoutError(f"round {round_id} shows no scenario after {timeout_s}s")
        time.sleep(0.1)


def _deviations(p: MoneyPlatform) -> list[dict[int, Strategy]]:
    """Candidate realised states off K*: everyone joins; one client of a type joins alone (the
    others buy); every client of one type joins (the others buy)."""
    by_type: dict[str, list[Agent]] = {}
    for a in sorted(p.honest, key=lambda a: (a.data_size, a.id)):
        by_type.setdefault(a.type_name, []).append(a)
    out = [{a.id: Strategy.JOIN for a in p.honest}]
    for members in reversed(list(by_type.values())):
        for joiners in (members[:1], members):
            chosen = {a.id for a in joiners}
            out.append({a.id: Strategy.JOIN if a.id in chosen else Strategy.BUY for a in p.honest})
    return out


def _beyond(quoted: dict[str, Decimal], realised: dict[str, float]) -> bool:
    return any(
        Decimal(str(r)) < min(quoted.get(n, Decimal(0)), Decimal(0))
        or Decimal(str(r)) > max(quoted.get(n, Decimal(0)), Decimal(0))
        for n, r in realised.items()
    )


def _overcharging(p: MoneyPlatform, used: set[int]) -> Callable[[QuoteOut], dict[int, Strategy]]:
    """An attacker's choice on a published quote: ask the pricing API for the schedule at each
    candidate deviation (the round's scenario, as the operator shows it) and play the first one,
    not played before, whose re-priced rewards lie beyond the quote (else the first unplayed)."""

    def choose(quote: QuoteOut) -> dict[int, Strategy]:
        scenario = round_scenario(p, quote.round_id)
        names = [t["name"] for t in scenario["types"]]
        type_of = {a.id: a.type_name for a in p.honest}
        quoted = {t.type_name: t.reward for t in quote.types}
        candidates = [(i, d) for i, d in enumerate(_deviations(p)) if i not in used]
        for i, deviation in candidates:
            k = [sum(1 for c, s in deviation.items() if s == Strategy.JOIN and type_of[c] == n)
                 for n in names]  # fmt: skip
            priced = p.pricing.post(
                "/v1/quote",
                json={"scenario": scenario, "mechanism": quote.mechanism, "participants": k},
                headers=OPERATOR,
            )
            if priced.status_code == 200:
                rewards = dict(zip(names, priced.json()["rewards"], strict=True))
                if _beyond(quoted, rewards):
                    used.add(i)
                    return deviation
        used.add(candidates[0][0])
        return candidates[0][1]

    return choose


@attack("quote_overcharge")
def quote_overcharge(p: MoneyPlatform) -> Attack:
    """Realised states off K*: nobody is paid or charged beyond the quote; subsidy ≤ budget."""
    out = Attack()
    used: set[int] = set()
    for _ in range(2):
        deviation = _overcharging(p, used)
        before, subsidy_before = (
            balances(p, p.honest),
            ledger_accounts(p).get("platform_subsidy", Decimal(0)),
        )
        quote, body, choices = play_round(p, deviation)
        after = balances(p, p.honest)
        subsidy = subsidy_before - ledger_accounts(p).get("platform_subsidy", Decimal(0))
        excess, notes = beyond_quote(quote, p.honest, choices, before, after)
        settlement = (body.get("summary") or {}).get("settlement") or {}
        budget = Decimal(settlement.get("subsidy_budget") or SUBSIDY_BUDGET)
        if subsidy > budget:
            notes.append(f"subsidy {subsidy} > budget {budget}")
        if not ledger_balanced(p):
            notes.append("ledger unbalanced")
        out.record(not notes, f"round {quote.round_id}: {'; '.join(notes)}", excess)
        out.extra.append(
            {
                "round_id": quote.round_id,
                "state": body["state"],
                "quoted_rewards": {t.type_name: str(t.reward) for t in quote.types},
                "quoted_price": str(quote.price),
                "realised_rewards": (body.get("summary") or {}).get("terms_rewards"),
                "realised_price": (body.get("summary") or {}).get("terms_price"),
                "booked_rewards": (body.get("summary") or {}).get("rewards"),
                "captured_rewards": settlement.get("captured_rewards"),
                "beyond_quote": _beyond(
                    {t.type_name: t.reward for t in quote.types},
                    (body.get("summary") or {}).get("terms_rewards") or {},
                ),
                "capture_rule": settlement.get("capture_rule"),
                "subsidy": str(subsidy),
            }
        )
    return out


# ------------------------------------------------------------------ non-finite JSON


def _resolve(schema: dict[str, Any], doc: dict[str, Any]) -> dict[str, Any]:
    """A schema with its top-level ``$ref`` (or a lone ``anyOf``/``allOf`` ref) resolved."""
    for _ in range(8):
        ref = schema.get("$ref")
        if ref is None:
            refs = [s for s in schema.get("allOf", []) + schema.get("anyOf", []) if "$ref" in s]
            if not refs:
                return schema
            ref = refs[0]["$ref"]
        node: Any = doc
        for part in ref.lstrip("#/").split("/"):
            node = node[part]
        schema = node
    return schema


def json_operations(doc: dict[str, Any]) -> Iterator[tuple[str, str, list[str]]]:
    """(method, path with ids filled in, body field names) of every operation with a JSON body."""
    for path, ops in doc.get("paths", {}).items():
        for method, op in ops.items():
            body = op.get("requestBody", {}).get("content", {}).get("application/json")
            if body is None:
                continue
            schema = _resolve(body.get("schema", {}), doc)
            fields = sorted(schema.get("properties", {})) or ["value"]
            yield method.upper(), re.sub(r"\{[^}]+\}", "1", path), fields


def _non_finite_bodies(fields: list[str]) -> Iterator[bytes]:
    for name in fields:
        for literal in NON_FINITE:
            yield f'{{"{name}": {literal}}}'.encode()
    for literal in NON_FINITE:  # a non-finite number nested in a list, with every field present
        yield ("{" + ", ".join(f'"{n}": [{literal}]' for n in fields) + "}").encode()


@attack("non_finite_json")
def non_finite_json(p: MoneyPlatform) -> Attack:
    """Every JSON route of every API with non-finite numbers: a 4xx problem, never 2xx or 5xx."""
    out = Attack()
    token = p.honest[0].auth if p.honest else {}
    for service in SERVICES_WITH_API:
        client = p.api(service)
        doc = client.get("/openapi.json").raise_for_status().json()
        headers = OPERATOR if service == "orchestration" else token
        for method, path, fields in json_operations(doc):
            for body in _non_finite_bodies(fields):
                r = client.request(
                    method,
                    path,
                    content=body,
                    headers={**headers, "Content-Type": "application/json"},
                )
                ok = 400 <= r.status_code < 500 and r.headers.get("content-type", "").startswith(
                    "application/problem+json"
                )
                out.record(ok, f"{service} {method} {path} {body[:60]!r} -> {r.status_code}")
    return out


# ------------------------------------------------------------------ the suite


def ledger_balanced(p: MoneyPlatform) -> bool:
    """The market's own ledger check (every transaction sums to zero, balances match entries)."""
    r = p.market.get("/v1/ledger/check", headers=OPERATOR).raise_for_status().json()
    return (
        r["unbalanced_transactions"] == 0
        and r["mismatched_accounts"] == 0
        and Decimal(r["total"]) == 0
    )


def start(workdir: Path, database_urls: dict[str, str] | None = None, **env: str) -> MoneyPlatform:
    """A fresh platform (four services; SQLite unless ``database_urls`` names a service's
    database, e.g. the market's on PostgreSQL) with the honest population registered."""
    stack = Stack(
        workdir=workdir / "stack", extra_env=stack_env(**env), database_urls=database_urls or {}
    )
    stack.start(timeout_s=180)
    clients = {s: httpx.Client(base_url=stack.url(s), timeout=60) for s in ("market", "pricing")}
    orchestration = httpx.Client(base_url=stack.url("orchestration"), timeout=60, headers=OPERATOR)
    try:
        honest = register_population(clients["market"], HONEST_TYPES, OPERATOR_TOKEN, "10")
    except BaseException:
        stop(MoneyPlatform(stack, clients["market"], clients["pricing"], orchestration, []))
        raise
    return MoneyPlatform(stack, clients["market"], clients["pricing"], orchestration, honest)


def stop(p: MoneyPlatform) -> None:
    """Close the clients and stop every process of the platform."""
    for c in (p.market, p.pricing, p.orchestration):
        c.close()
    p.stack.stop()


@dataclass
class HonestRound:
    """An honest round: its participants, those booked other than quoted (flagged), the rule."""

    participants: int
    flagged: int
    rule: str | None
    subsidy: Decimal
    quoted_subsidy: Decimal = Decimal(0)
    """The quote's incentive cost at K* ([Σ K_i r_i − Σ B_i p]⁺): what the round may cost."""


def honest_round(p: MoneyPlatform) -> HonestRound:
    """Every honest client best-responds to the quote (so the round settles at K*): each
    participant must be booked exactly its type's quoted reward (Theorem 3: nothing is cut)."""
    from mots.economics.utility import PowerUtility
    from mots.local.agents import choose

    utility = PowerUtility.model_validate(UTILITY)
    before = balances(p, p.honest)
    quote, body, choices = play_round(p, lambda q: choose(p.honest, q, utility))
    after = balances(p, p.honest)
    quoted = {t.type_name: t.reward for t in quote.types}
    joined = [a for a in p.honest if choices[a.id] == Strategy.JOIN]
    flagged = sum(1 for a in joined if after[a.id] - before[a.id] != quoted[a.type_name])
    settlement = (body.get("summary") or {}).get("settlement") or {}
    return HonestRound(
        len(joined),
        flagged,
        settlement.get("capture_rule"),
        Decimal(settlement.get("subsidy") or 0),
        Decimal(quote.incentive_cost),
    )


FRESH_QUOTE = ("shortchanged_participant",)
"""Attacks that must meet the fresh platform's quote, so they run before the honest round: the
published rounds move the quote (the error model learns), and by the end of the suite it offered
no shortchanging state (the whole bench at 8c49d72 reported ``shortchanged_participant`` tried 0)."""


def run(workdir: Path, options: dict[str, Any]) -> SuiteResult:
    """Every attack of :data:`FRESH_QUOTE` named, an honest round at K*, every other registered
    attack (or those named in ``options["money_attacks"]``) on one fresh platform, then the
    ledger check."""
    names = list(options.get("money_attacks") or ATTACKS)
    first = [n for n in names if n in FRESH_QUOTE]
    p = start(workdir)
    try:
        result = SuiteResult("money")
        for name in first:
            result.attacks[name] = ATTACKS[name](p).as_dict()
        honest = honest_round(p)
        result.honest_rounds, result.honest_flagged = honest.participants, honest.flagged
        result.extra["honest_round"] = {
            "participants": honest.participants,
            "booked_other_than_quoted": honest.flagged,
            "capture_rule": honest.rule,
            "subsidy": _decimal_string(honest.subsidy),
        }
        for name in names:
            if name not in first:
                result.attacks[name] = ATTACKS[name](p).as_dict()
        result.ledger_balanced = ledger_balanced(p)
        return result
    finally:
        stop(p)


# The attacks of issue 13's part A (attested types, tokens, exposure) register themselves here.
from benchmarks.integrity import attested as _attested  # noqa: E402, F401
from benchmarks.integrity import input_attacks as _input_attacks  # noqa: E402, F401
from benchmarks.integrity import pay_attacks as _pay_attacks  # noqa: E402, F401
from benchmarks.integrity import secret_attacks as _secret_attacks  # noqa: E402, F401
