"""Simulated market clients for the demo and the benchmarks: register, read the quote, respond.

Each agent holds its own token and acts only through the market's REST API. Its choice is the
best response of Eq. (6) at the published state: π(J) = U(ε) − C_i + r_i, π(B) = U(ε) − p,
π(A) = 0. SWAN makes J and B pay the same at K* (Mechanism 1), so ties are split as the quote's
targets ask: the first K*_i agents of a type (by id) join, the next B*_i buy.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import httpx

from mots.economics.utility import Utility
from mots.platform.schemas import Strategy

OPERATOR_HEADER = "Authorization"
TIE = 1e-6


@dataclass
class Agent:
    """One registered client of the market."""

    id: int
    name: str
    type_name: str
    data_size: int
    cost: Decimal
    token: str

    @property
    def auth(self) -> dict[str, str]:
        """Its bearer header."""
        return {"Authorization": f"Bearer {self.token}"}


def register_population(
    http: httpx.Client,
    types: list[dict[str, Any]],
    operator_token: str,
    deposit: str = "100",
) -> list[Agent]:
    """Register ``count`` clients of each type and fund each wallet (as the operator)."""
    agents: list[Agent] = []
    for t in types:
        for j in range(int(t["count"])):
            r = http.post(
                "/v1/clients",
                json={
                    "name": f"{t['name']}-{j + 1}",
                    "type_name": t["name"],
                    "data_size": int(t["data_size"]),
                    "cost": str(t["cost"]),
                },
            )
            r.raise_for_status()
            body = r.json()
            agents.append(
                Agent(
                    body["id"],
                    body["name"],
                    t["name"],
                    body["data_size"],
                    Decimal(body["cost"]),
                    body["token"],
                )
            )
    for a in agents:
        r = http.post(
            "/v1/deposits",
            json={"client_id": a.id, "amount": deposit},
            headers={
                "Authorization": f"Bearer {operator_token}",
                "Idempotency-Key": f"fund-{uuid.uuid4().hex}",
            },
        )
        r.raise_for_status()
    return agents


def wait_for_quote(
    http: httpx.Client, agent: Agent, round_id: int, timeout_s: float = 120
) -> dict[str, Any]:
    """Poll until the market publishes round ``round_id``'s quote and collects decisions."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        r = http.get(f"/v1/rounds/{round_id}/quote", headers=agent.auth)
        if r.status_code == 200 and r.json()["state"] == "collecting":
            quote: dict[str, Any] = r.json()
            return quote
        time.sleep(0.05)
    raise TimeoutError(f"round {round_id} did not open for decisions within {timeout_s}s")


def choose(agents: list[Agent], quote: dict[str, Any], utility: Utility) -> dict[int, Strategy]:
    """Each agent's best response at the published state, ties split by the quote's targets."""
    u = float(utility.value(quote["epsilon"]))
    price = float(quote["price"])
    terms = {t["type_name"]: t for t in quote["types"]}
    choices: dict[int, Strategy] = {}
    by_type: dict[str, list[Agent]] = {}
    for a in sorted(agents, key=lambda a: a.id):
        by_type.setdefault(a.type_name, []).append(a)
    for name, members in by_type.items():
        t = terms.get(name)
        join_slots = t["target_participants"] if t else 0
        buy_slots = t["target_buyers"] if t else 0
        for a in members:
            pay = {Strategy.ABSTAIN: 0.0, Strategy.BUY: u - price}
            if t is not None:
                pay[Strategy.JOIN] = u - float(a.cost) + float(t["reward"])
            best = max(pay.values())
            good = [s for s, v in pay.items() if v >= best - TIE]
            if Strategy.JOIN in good and join_slots > 0:
                choices[a.id], join_slots = Strategy.JOIN, join_slots - 1
            elif Strategy.BUY in good and buy_slots > 0:
                choices[a.id], buy_slots = Strategy.BUY, buy_slots - 1
            else:
                choices[a.id] = good[0] if len(good) == 1 else Strategy.ABSTAIN
    return choices


def act(
    http: httpx.Client, agents: list[Agent], round_id: int, choices: dict[int, Strategy]
) -> None:
    """Declare each agent's strategy; buyers pay (with an idempotency key per agent and round)."""
    for a in agents:
        s = choices[a.id]
        if s == Strategy.BUY:
            r = http.post(
                "/v1/purchases",
                json={"round_id": round_id},
                headers={**a.auth, "Idempotency-Key": f"purchase-round{round_id}-client{a.id}"},
            )
        else:
            r = http.put(
                f"/v1/rounds/{round_id}/decision", json={"strategy": s.value}, headers=a.auth
            )
        r.raise_for_status()
