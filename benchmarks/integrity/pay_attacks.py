"""Issue 24's attacks on who is paid (points 1 and 3), rows of ``make bench-integrity``'s money suite.

- ``revoked_participant``: a type-3 client registers, joins a round, and the operator revokes it
  (``DELETE /v1/clients/{id}``) once while the round collects and once while it trains. Caught
  when the round leaves it out of K or settles it as removed, and it is paid nothing.
- ``departed_participant``: the same with the client leaving (``DELETE /v1/me``).
- ``shortchanged_participant``: clients quoted to join buy instead (issue 24's 150 small
  clients) while some of a type quoted a payout join as quoted; the attackers pick, from the
  round's schedule re-priced at candidate states, one where the reward of those left is below
  their quote (what the old settlement paid them). ``tried`` counts the honest participants,
  ``refused_or_caught`` those paid at least their quoted reward; ``paid`` is what any wallet
  moved beyond the quote.

``paid`` of the removal rows is the reward a removed client received: read from its wallet when
its token still works (departed), else the settlement's rewards less what the other
participants' wallets received (a revoked client's token no longer reads its wallet).
"""

from __future__ import annotations

import time
from decimal import Decimal
from typing import Any

from benchmarks.integrity.money import (
    OPERATOR,
    OPERATOR_TOKEN,
    SUBSIDY_BUDGET,
    UTILITY,
    Attack,
    MoneyPlatform,
    attack,
    balances,
    beyond_quote,
    round_scenario,
    wait_terminal,
)
from mots.local.agents import Agent, act, choose, register_population, wait_for_quote
from mots.platform.api.base import Strategy
from mots.platform.api.market import QuoteOut

VICTIM_TYPE = {"name": "type-3", "count": 1, "data_size": 300, "cost": "3.0"}
WHEN = ("collecting", "training")
SHORTCHANGE_ROUNDS = 2


def _utility() -> Any:
    from mots.economics.utility import PowerUtility

    return PowerUtility.model_validate(UTILITY)


def _remove(p: MoneyPlatform, how: str, victim: Agent) -> None:
    if how == "revoked":
        r = p.market.delete(f"/v1/clients/{victim.id}", headers=OPERATOR)
    else:
        r = p.market.delete("/v1/me", headers=victim.auth)
    r.raise_for_status()


def _state(p: MoneyPlatform, round_id: int) -> str:
    r = p.orchestration.get(f"/v1/rounds/{round_id}", headers=OPERATOR).raise_for_status()
    return str(r.json()["state"])


def _wait_past_collecting(p: MoneyPlatform, round_id: int, timeout_s: float = 120.0) -> str:
    """Poll until the round has closed its collection (it then trains); the state seen."""
    deadline = time.monotonic() + timeout_s
    while (state := _state(p, round_id)) in ("open", "collecting"):
        if time.monotonic() > deadline:
            raise TimeoutError(f"round {round_id} still {state} after {timeout_s}s")
        time.sleep(0.05)
    return state


def _open(p: MoneyPlatform, agent: Agent) -> QuoteOut:
    r = p.orchestration.post("/v1/rounds", headers=OPERATOR).raise_for_status()
    return wait_for_quote(p.market, agent, int(r.json()["round_id"]))


def _removal_try(p: MoneyPlatform, how: str, when: str) -> tuple[bool, Decimal, dict[str, Any]]:
    """One victim joins one round and is removed ``when``: (caught, paid to it, the record)."""
    (victim,) = register_population(p.market, [VICTIM_TYPE], OPERATOR_TOKEN, "10")
    quote = _open(p, victim)
    choices = choose(p.honest, quote, _utility())
    before = balances(p, [*p.honest, victim])
    act(p.market, [victim], quote.round_id, {victim.id: Strategy.JOIN})
    seen = "collecting"
    if when == "collecting":
        _remove(p, how, victim)
        act(p.market, p.honest, quote.round_id, choices)
    else:
        act(p.market, p.honest, quote.round_id, choices)
        seen = _wait_past_collecting(p, quote.round_id)
        _remove(p, how, victim)
    body = wait_terminal(p, quote.round_id)
    after = balances(p, p.honest)
    summary = body.get("summary") or {}
    settlement = summary.get("settlement") or {}
    joined_3 = sum(
        1 for a in p.honest if a.type_name == "type-3" and choices[a.id] == Strategy.JOIN
    )
    in_k = int((summary.get("participants") or {}).get("type-3", 0)) > joined_3
    honest_paid = sum(
        (max(Decimal(0), after[a.id] - before[a.id]) for a in p.honest), start=Decimal(0)
    )
    paid = Decimal(str(settlement.get("rewards_paid") or 0)) - honest_paid
    if how == "departed":  # its token still reads its wallet: the direct figure
        paid = balances(p, [victim])[victim.id] - before[victim.id]
    removed = victim.id in (settlement.get("removed") or [])
    caught = paid <= 0 and (removed or not in_k)
    record = {
        "round_id": quote.round_id,
        "removed_in": seen,
        "state": body["state"],
        "in_k": in_k,
        "settled_as_removed": removed,
        "quoted_reward": str({t.type_name: t.reward for t in quote.types}.get("type-3")),
        "victim_paid": str(paid),
    }
    return caught, max(paid, Decimal(0)), record


def _old_and_new(
    scenario: dict[str, Any], quote: QuoteOut, k: dict[str, int], buyers: int
) -> tuple[dict[str, float], dict[str, float]]:
    """The rewards per type the settlement books at (K, B) under rules 1–2 (the old settlement)
    and rules 1–3, from the round's schedule re-priced at K (what the pricing service sends) and
    the suite's subsidy budget: the attackers' own arithmetic, no request inside the collection."""
    from mots.economics.capture import capture
    from mots.economics.mechanisms.registry import get_mechanism
    from mots.economics.scenario import Scenario

    sc = Scenario.model_validate(scenario)
    names = [t.name for t in sc.types]
    kk = [k.get(n, 0) for n in names]
    realised = get_mechanism(quote.mechanism, sc).quote(kk)
    quoted = {t.type_name: float(t.reward) for t in quote.types}
    qk = {t.type_name: t.target_participants for t in quote.types}
    args = (
        float(quote.price),
        [quoted.get(n, 0.0) for n in names],
        realised.price,
        realised.rewards,
        kk,
        [buyers],
        float(SUBSIDY_BUDGET),
    )
    old = capture(*args)
    new = capture(*args, quoted_participants=[qk.get(n, 0) for n in names])
    return (
        dict(zip(names, old.rewards.tolist(), strict=True)),
        dict(zip(names, new.rewards.tolist(), strict=True)),
    )


def _deviation(
    p: MoneyPlatform, quote: QuoteOut
) -> tuple[dict[int, Strategy], list[Agent], dict[str, Any]]:
    """The attackers' pick: keep the first 1, 2, … joiners of a type quoted a payout (highest
    first), every other client quoted to join buys instead; play the first such state where the
    old settlement would pay the kept joiners less than their quote though the round's money
    and budget can fund it. (The strategies, the honest participants kept — none when no such
    state exists on this quote — and what the old and new rules would book.)"""
    choices = choose(p.honest, quote, _utility())
    quoted = {t.type_name: t.reward for t in quote.types}
    joiners: dict[str, list[Agent]] = {}
    for a in sorted(p.honest, key=lambda a: a.id):
        if choices[a.id] == Strategy.JOIN:
            joiners.setdefault(a.type_name, []).append(a)
    candidates = [
        members[:n]
        for t, members in sorted(joiners.items(), key=lambda kv: -quoted[kv[0]])
        if quoted[t] > 0
        for n in range(1, len(members) + 1)
    ]
    scenario = round_scenario(p, quote.round_id) if candidates else {}
    for kept in candidates:
        t = kept[0].type_name
        buyers = sum(1 for a in p.honest if choices[a.id] != Strategy.ABSTAIN) - len(kept)
        old, new = _old_and_new(scenario, quote, {t: len(kept)}, buyers)
        if old[t] < float(quoted[t]) - 1e-6 <= new[t]:
            keep = {a.id for a in kept}
            deviated = {
                a.id: Strategy.BUY
                if choices[a.id] == Strategy.JOIN and a.id not in keep
                else choices[a.id]
                for a in p.honest
            }
            return deviated, kept, {"old_rules_pay": old[t], "new_rules_pay": new[t]}
    return choices, [], {}


@attack("shortchanged_participant")
def shortchanged_participant(p: MoneyPlatform) -> Attack:
    """Clients quoted to join buy instead (issue 24's 150 small clients) so that the old
    settlement would shortchange the one left; it must be paid at least its quoted reward
    (caught), and no wallet moves beyond its quote. A round whose quote offers no such state is
    played honestly and not counted."""
    out = Attack()
    for _ in range(SHORTCHANGE_ROUNDS):
        quote = _open(p, p.honest[0])
        deviated, honest, predicted = _deviation(p, quote)
        before = balances(p, p.honest)
        act(p.market, p.honest, quote.round_id, deviated)
        body = wait_terminal(p, quote.round_id)
        after = balances(p, p.honest)
        quoted = {t.type_name: t.reward for t in quote.types}
        excess, notes = beyond_quote(quote, p.honest, deviated, before, after)
        settlement = (body.get("summary") or {}).get("settlement") or {}
        for a in honest:
            got = after[a.id] - before[a.id]
            note = f"round {quote.round_id}: client {a.id} paid {got}, quoted {quoted[a.type_name]}"
            out.record(got >= quoted[a.type_name], note, excess)
        out.details.extend(notes)
        out.extra.append(
            {
                "round_id": quote.round_id,
                "state": body["state"],
                "honest": [a.id for a in honest],
                "buyers": sum(1 for a in p.honest if deviated[a.id] == Strategy.BUY),
                "quoted": {k: str(v) for k, v in quoted.items()},
                **predicted,
                "captured_rewards": settlement.get("captured_rewards"),
                "capture_rule": settlement.get("capture_rule"),
                "surplus": settlement.get("surplus"),
                "subsidy": settlement.get("subsidy"),
            }
        )
    return out


def removal_tries(p: MoneyPlatform, how: str) -> Attack:
    """A client ``how`` (revoked or departed) while its round collects, then while it trains
    (also the Flower-engine rows of :mod:`benchmarks.integrity.flower_removals`)."""
    out = Attack()
    for when in WHEN:
        caught, paid, record = _removal_try(p, how, when)
        out.record(caught, f"{how} while {when}: {record}", paid)
        out.extra.append(record)
    return out


@attack("revoked_participant")
def revoked_participant(p: MoneyPlatform) -> Attack:
    """A participant revoked while its round collects, then while it trains: never paid."""
    return removal_tries(p, "revoked")


@attack("departed_participant")
def departed_participant(p: MoneyPlatform) -> Attack:
    """A participant that leaves while its round collects, then while it trains: never paid."""
    return removal_tries(p, "departed")
