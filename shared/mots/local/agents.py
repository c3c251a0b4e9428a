"""Simulated market clients for the demo and the benchmarks: register, read the quote, respond.

Each agent holds its own token and acts only through the market's REST API, with the platform's
client SDK (:class:`mots.client.MarketClient`). Its choice is the best response of Eq. (6) at the
published state (:func:`mots.client.respond`), ties broken by the economics core's one rule
(:mod:`mots.economics.best_response`): an agent's place in its type's queue is its rank by client
id, so the first K*_i agents of a type join and the next B*_i buy when J and B tie (as SWAN makes
them at K*).
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import httpx

from mots.client import ClientFacts, MarketClient, respond
from mots.economics.utility import Utility
from mots.platform.api.base import Strategy
from mots.platform.api.market import ClientRegistration, EnrolmentIn, QuoteOut
from mots.platform.api.tasks import DEFAULT_TASK


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
        """Its bearer header (for calls the SDK does not make)."""
        return {"Authorization": f"Bearer {self.token}"}

    @property
    def facts(self) -> ClientFacts:
        """Its private facts: type, D_i and C_i."""
        return ClientFacts(self.type_name, self.data_size, self.cost)


def _client(market: MarketClient | httpx.Client) -> MarketClient:
    """The SDK client for ``market``: itself, or one over the given httpx client."""
    return market if isinstance(market, MarketClient) else MarketClient.over(market)


def register_population(
    market: MarketClient | httpx.Client,
    types: list[dict[str, Any]],
    operator_token: str,
    deposit: str = "100",
    task: str = DEFAULT_TASK,
) -> list[Agent]:
    """Enrol ``count`` clients of each type into ``task`` and fund each wallet: the operator
    attests each type with one enrolment code for ``count`` registrations, which its clients
    redeem (the task must be stored at the market, or be the default one)."""
    sdk = _client(market)
    operator = sdk.with_token(operator_token)
    agents: list[Agent] = []
    for t in types:
        code = operator.enrol(
            EnrolmentIn(
                type_name=t["name"],
                data_size=int(t["data_size"]),
                cost=Decimal(str(t["cost"])),
                uses=int(t["count"]),
                ttl_s=3600,
                task=task,
            )
        ).code
        for j in range(int(t["count"])):
            name = f"{t['name']}-{j + 1}" if task == DEFAULT_TASK else f"{task}-{t['name']}-{j + 1}"
            c = sdk.register(ClientRegistration(name=name, enrolment_code=code))
            agents.append(Agent(c.id, c.name, c.type_name, c.data_size, c.cost, c.token))
    for a in agents:
        operator.deposit(a.id, Decimal(deposit))
    return agents


def wait_for_quote(
    market: MarketClient | httpx.Client, agent: Agent, round_id: int, timeout_s: float = 120
) -> QuoteOut:
    """Poll until the market publishes round ``round_id``'s quote and collects decisions."""
    return _client(market).with_token(agent.token).wait_for_quote(round_id, timeout_s=timeout_s)


def choose(agents: list[Agent], quote: QuoteOut, utility: Utility) -> dict[int, Strategy]:
    """Each agent's best response at the published state; its place is its rank in its type."""
    u = float(utility.value(quote.epsilon))
    rank: dict[str, int] = {}
    choices: dict[int, Strategy] = {}
    for a in sorted(agents, key=lambda a: a.id):
        place = rank.get(a.type_name, 0)
        rank[a.type_name] = place + 1
        choices[a.id] = respond(a.facts, quote, u, float(place)).strategy
    return choices


def act(
    market: MarketClient | httpx.Client,
    agents: list[Agent],
    round_id: int,
    choices: dict[int, Strategy],
) -> None:
    """Declare each agent's strategy; buyers pay (with an idempotency key per agent and round)."""
    sdk = _client(market)
    for a in agents:
        mine = sdk.with_token(a.token)
        if choices[a.id] == Strategy.BUY:
            mine.buy(round_id, idempotency_key=f"purchase-round{round_id}-client{a.id}")
        else:
            mine.declare(round_id, choices[a.id])
