"""The participation bond (issue 37 #6), on SQLite and PostgreSQL: a quote's bond B_i is held
from a joiner's wallet at join (402 when the wallet holds less than the fee and the bond
together: no decision), slashed to platform:surplus when the participant's update failed
verification, returned whole otherwise (trained, dropped out, or a round settled by rule); the
ledger stays exact (``ledger-check``) and the bond accounts end at zero."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import select

from mots.platform.db import in_transaction
from services.market import ledger, rounds
from services.market.models import Account
from tests.services.market.conftest import OPERATOR
from tests.services.market.test_no_credit import _artifact, _join, _settle
from tests.services.market.test_removed_participants import _balance, _balanced

REWARDS = {"small": "-0.25", "large": "4.0"}
BONDS = {"small": "1.0", "large": "2.0"}


def _surplus(market: TestClient) -> Decimal:
    with market.app.state.sessions() as session:
        acc = session.scalar(select(Account).where(Account.name == ledger.SURPLUS))
        return Decimal(acc.balance_micros if acc is not None else 0) / 10**6


def _large(register: Any, name: str) -> dict[str, Any]:
    return register(name=name, type_name="large", data_size=300, cost="1.0")


def test_a_bond_is_held_at_join_and_a_short_wallet_is_refused_402(
    market: TestClient, register: Any, fund: Any, open_round: Any
) -> None:
    """A large joiner holding 1.5 cannot post a bond of 2 (402 naming the bond and the field, no
    decision); funded to 5 it joins, 2 leave its wallet once (a repeat holds nothing more), and
    joining is then final (409 on abstain). A small joiner owes the fee 0.25 and the bond 1
    together: 1.0 is short (402 naming both), 1.25 is enough."""
    short, funded = _large(register, "short"), _large(register, "funded")
    small = register(name="small")
    fund(short["id"], "1.5")
    fund(funded["id"], "5")
    fund(small["id"], "1")
    open_round(price="2.5", rewards=REWARDS, bonds=BONDS)
    r = _join(market, short)
    assert r.status_code == 402, r.text
    assert "participation bond of 2.000000" in r.json()["detail"]
    assert "strategy" in r.json()["detail"]
    assert _balance(market, short["id"]) == Decimal("1.5")
    decided = market.get("/v1/rounds/1/decisions", headers=OPERATOR).json().get("items", [])
    assert short["id"] not in {d["client_id"] for d in decided}
    for _ in range(2):
        assert _join(market, funded).status_code == 200
        assert _balance(market, funded["id"]) == Decimal("3")
    assert _join(market, funded, "abstain").status_code == 409
    r = _join(market, small)
    assert r.status_code == 402 and "fee of 0.250000" in r.json()["detail"], r.text
    assert "participation bond of 1.000000" in r.json()["detail"]
    fund(small["id"], "0.25")
    assert _join(market, small).status_code == 200
    assert _balance(market, small["id"]) == 0
    _settle(market, [], refund_buyers=True)
    _balanced(market)


def test_a_failed_verification_forfeits_the_bond_every_other_bond_returns(
    market: TestClient, register: Any, fund: Any, open_round: Any
) -> None:
    """Three large joiners post 2 each: the verified one is paid 4 and gets its bond back, the
    one whose update failed verification forfeits its 2 to platform:surplus and gets no reward,
    the one that dropped out gets its 2 back; the settlement reports 4 returned and 2 slashed,
    and the ledger balances with the bond accounts at zero."""
    ok, shirker, gone = (_large(register, n) for n in ("ok", "shirker", "gone"))
    for c in (ok, shirker, gone):
        fund(c["id"], "5")
    open_round(price="2.5", rewards=REWARDS, bonds=BONDS)
    for c in (ok, shirker, gone):
        assert _join(market, c).status_code == 200
    before = _surplus(market)
    result = _settle(
        market,
        [ok["id"], shirker["id"], gone["id"]],
        dropped=[shirker["id"], gone["id"]],
        failed_verification=[shirker["id"]],
        **_artifact(market),
    )
    in_transaction(market.app.state.sessions, lambda s: rounds.publish(s, 1))
    assert (result.bonds_returned, result.bonds_slashed) == (Decimal(4), Decimal(2))
    assert _balance(market, ok["id"]) == Decimal(9)
    assert _balance(market, shirker["id"]) == Decimal(3)
    assert _balance(market, gone["id"]) == Decimal(5)
    assert _surplus(market) - before >= Decimal(2)
    assert market.get("/v1/rounds/1/model", headers=shirker["auth"]).status_code == 403
    _balanced(market)


def test_a_round_settled_by_rule_returns_every_bond(
    market: TestClient, register: Any, fund: Any, open_round: Any
) -> None:
    """The round fails: each joiner's bond comes back whole, even one the trainer had named as
    failing verification (a round settled by rule slashes nothing)."""
    a, b = _large(register, "a"), _large(register, "b")
    for c in (a, b):
        fund(c["id"], "2")
    open_round(price="2.5", rewards=REWARDS, bonds=BONDS)
    for c in (a, b):
        assert _join(market, c).status_code == 200
        assert _balance(market, c["id"]) == 0
    result = _settle(market, [], refund_buyers=True, failed_verification=[a["id"]])
    assert (result.bonds_returned, result.bonds_slashed) == (Decimal(4), Decimal(0))
    assert _balance(market, a["id"]) == _balance(market, b["id"]) == Decimal(2)
    _balanced(market)


def test_a_negative_bond_in_a_quote_is_refused() -> None:
    """A bond is held money: a quote carrying B_i < 0 does not validate (the field named)."""
    import pytest
    from pydantic import ValidationError

    from tests.services.market.conftest import open_round_payload

    with pytest.raises(ValidationError, match="bonds"):
        open_round_payload(bonds={"large": "-1.0"})
