"""The simulated clients' choices: the demo's SWAN quote is answered with exactly its targets."""

from __future__ import annotations

import random
from decimal import Decimal
from pathlib import Path

from mots.client import respond
from mots.economics.best_response import TIE_TOLERANCE
from mots.economics.mechanisms.swan_robust import RobustSwanMechanism
from mots.economics.utility import PowerUtility
from mots.local.agents import Agent, choose
from mots.local.demo import DEMO_TYPES, DEMO_UTILITY
from mots.platform.api.base import RoundState, Strategy
from mots.platform.api.market import QuoteOut, TypeQuote
from mots.scenario_file import load_scenario

SCENARIO = Path(__file__).resolve().parents[3] / "examples" / "scenarios" / "platform_demo.yaml"
MICRO = Decimal("0.000001")


def _demo_quote(k: list[int], b: list[int]) -> QuoteOut:
    """Robust SWAN's quote of the demo's market at state K, in micro-units as the market books it."""
    sc = load_scenario(SCENARIO)
    q = RobustSwanMechanism(sc).quote(k)
    return QuoteOut(
        round_id=1,
        state=RoundState.COLLECTING,
        mechanism="swan_robust",
        price=Decimal(str(q.price)).quantize(MICRO),
        types=[
            TypeQuote(
                type_name=t.name,
                reward=Decimal(str(r)).quantize(MICRO),
                target_participants=ki,
                target_buyers=bi,
            )
            for t, r, ki, bi in zip(sc.types, q.rewards, k, b, strict=True)
        ],
        epsilon=float(RobustSwanMechanism(sc).optimum.epsilon),
        welfare=0.0,
        incentive_cost=Decimal(0),
    )


def _population(seed: int) -> list[Agent]:
    """The demo's 20 clients with client ids in a shuffled order across types."""
    ids = list(range(1, 21))
    random.Random(seed).shuffle(ids)
    agents = []
    for t in DEMO_TYPES:
        for j in range(int(t["count"])):
            agents.append(
                Agent(
                    ids.pop(),
                    f"{t['name']}-{j}",
                    t["name"],
                    t["data_size"],
                    Decimal(t["cost"]),
                    "x",
                )
            )
    return agents


def test_the_demos_quote_is_answered_with_its_targets() -> None:
    """At K* = (0, 5, 5), B* = (10, 0, 0) J and B tie for every type, and the agents' choices
    reproduce the announced state exactly, whatever order their ids came in."""
    quote = _demo_quote([0, 5, 5], [10, 0, 0])
    u = float(PowerUtility.model_validate(DEMO_UTILITY).value(quote.epsilon))
    for a in _population(0):
        pay = respond(a.facts, quote, u, 0.0).payoffs
        assert abs(pay[Strategy.JOIN] - pay[Strategy.BUY]) <= TIE_TOLERANCE < pay[Strategy.BUY]
    for seed in range(5):
        agents = _population(seed)
        choices = choose(agents, quote, PowerUtility.model_validate(DEMO_UTILITY))
        for t, k, b in zip(DEMO_TYPES, (0, 5, 5), (10, 0, 0), strict=True):
            picks = [choices[a.id] for a in agents if a.type_name == t["name"]]
            assert picks.count(Strategy.JOIN) == k and picks.count(Strategy.BUY) == b


def test_ties_go_to_the_lowest_ids_first() -> None:
    """With targets K* = 2, B* = 3 on a tied type, its two lowest ids join and the next three buy."""
    quote = _demo_quote([0, 5, 5], [10, 0, 0])
    type_3 = quote.types[2].model_copy(update={"target_participants": 2, "target_buyers": 3})
    quote = quote.model_copy(update={"types": [*quote.types[:2], type_3]})
    agents = _population(1)
    choices = choose(agents, quote, PowerUtility.model_validate(DEMO_UTILITY))
    ranked = sorted((a for a in agents if a.type_name == "type-3"), key=lambda a: a.id)
    assert [choices[a.id] for a in ranked] == [Strategy.JOIN] * 2 + [Strategy.BUY] * 3
