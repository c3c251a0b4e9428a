"""Authorise-then-capture at the market (services/market/rounds.py) on SQLite and PostgreSQL:
realised terms beyond the quote are bounded by it, a lower realised price refunds the buyers
the difference, the subsidy never exceeds the round's budget, and the ledger stays exact."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from fastapi.testclient import TestClient

from mots.platform.contracts import OpenRoundPayload, SettlePayload
from mots.platform.db import in_transaction
from services.market import captured_terms, rounds
from tests.services.market.conftest import OPERATOR, open_round_payload


def _settle(market: TestClient, payload: SettlePayload) -> Any:
    return in_transaction(market.app.state.sessions, lambda s: rounds.settle_round(s, payload))


def _balance(market: TestClient, client: dict[str, Any]) -> Decimal:
    return Decimal(market.get("/v1/me/balance", headers=client["auth"]).json()["balance"])


def _balanced(market: TestClient) -> None:
    check = market.get("/v1/ledger/check", headers=OPERATOR).json()
    assert check["unbalanced_transactions"] == 0 and check["mismatched_accounts"] == 0
    assert Decimal(check["total"]) == 0 and Decimal(check["accounts"]["round_pools"]) == 0


def _round(market: TestClient, register, fund, open_round, **quote: Any) -> tuple[Any, ...]:
    small = register(name="s", type_name="small", data_size=50, cost="0.5")
    large = register(name="l", type_name="large", data_size=300, cost="3")
    buyer = register(name="b", type_name="small", data_size=50, cost="0.5")
    fund(buyer["id"], "10")
    fund(small["id"], "1.25")  # the small type's quoted fee, held at join (issue 37)
    open_round(price="2.5", rewards={"small": "-1.25", "large": "4.0"}, **quote)
    for c in (small, large):
        r = market.put("/v1/rounds/1/decision", json={"strategy": "join"}, headers=c["auth"])
        assert r.status_code == 200, r.text
    r = market.post(
        "/v1/purchases",
        json={"round_id": 1},
        headers={**buyer["auth"], "Idempotency-Key": "buyer-0001"},
    )
    assert r.status_code == 201, r.text
    return small, large, buyer


def test_realised_terms_beyond_the_quote_are_bounded_by_it(
    market: TestClient, register, fund, open_round
) -> None:
    """Re-priced: small charged 8.224 (quoted 1.25), large paid 9 (quoted 4), price 1.5 (quoted
    2.5): small is charged 1.25, large paid 4, the buyer refunded 1; nothing beyond the quote."""
    small, large, buyer = _round(market, register, fund, open_round)
    result = _settle(
        market,
        SettlePayload(
            round_id=1,
            rewards={"small": Decimal("-8.224"), "large": Decimal("9")},
            price=Decimal("1.5"),
            participants=[small["id"], large["id"]],
        ),
    )
    assert result.captured_rewards == {"small": Decimal("-1.25"), "large": Decimal("4")}
    assert result.captured_price == Decimal("1.5") and result.refunds == Decimal(1)
    assert result.charges == Decimal("1.25") and result.rewards_paid == Decimal(4)
    assert result.subsidy == Decimal("1.25") <= result.subsidy_budget == Decimal(100)
    assert result.capture_rule is not None and "bounded by the quote" in result.capture_rule
    assert _balance(market, small) == 0 and _balance(market, large) == 4
    assert _balance(market, buyer) == Decimal("8.5")
    _balanced(market)


def test_the_subsidy_never_exceeds_the_rounds_budget(
    market: TestClient, register, fund, open_round
) -> None:
    """A quote with budget 0.5 whose realised subsidy (4 − 1.25 − 2.5 = 0.25) fits: as realised."""
    small, large, _ = _round(market, register, fund, open_round, subsidy_budget="0.5")
    result = _settle(
        market,
        SettlePayload(
            round_id=1,
            rewards={"small": Decimal("-1.25"), "large": Decimal("4")},
            participants=[small["id"], large["id"]],
        ),
    )
    # income 1.25 + 2.5 = 3.75; uncapped subsidy 0.25 fits; so capture as realised
    assert result.subsidy == Decimal("0.25") and result.capture_rule == "captured as realised"
    _balanced(market)


def test_payouts_are_scaled_pro_rata_down_to_the_budget(
    market: TestClient, register, fund, open_round
) -> None:
    """No buyer income (price realised at 0): payouts 4 − charges 1.25 = 2.75 > 0.5, so rule 2
    scales large to 1.25 + 0.5 = 1.75; large joined as quoted, so rule 3 withholds 2.25 of the
    buyer's 2.5 refund to pay it its quoted 4; the subsidy is exactly the budget."""
    small, large, buyer = _round(market, register, fund, open_round, subsidy_budget="0.5")
    result = _settle(
        market,
        SettlePayload(
            round_id=1,
            rewards={"small": Decimal("-1.25"), "large": Decimal("4")},
            price=Decimal(0),
            participants=[small["id"], large["id"]],
        ),
    )
    assert result.refunds == Decimal("0.25") and result.captured_price == Decimal("2.25")
    assert result.captured_rewards["large"] == Decimal("4")
    assert result.subsidy == Decimal("0.5") == result.subsidy_budget
    assert result.capture_rule is not None and "scaled" in result.capture_rule
    assert "topped up to the quote" in result.capture_rule
    assert _balance(market, large) == Decimal("4") and _balance(market, buyer) == Decimal("7.75")
    _balanced(market)


def test_a_quote_without_a_budget_takes_the_markets_default() -> None:
    """The pure capture of amounts: the default budget applies; unknown types were authorised 0."""
    quote: OpenRoundPayload = open_round_payload(rewards={"small": "1"})
    payload = SettlePayload(
        round_id=1, rewards={"small": Decimal(5), "ghost": Decimal(7)}, participants=[1, 2]
    )
    terms = captured_terms.captured_terms(quote, payload, {"small": 3, "ghost": 1}, 0, Decimal(2))
    assert terms.rewards == {"ghost": 0, "small": 666_666}
    assert terms.budget == 2_000_000 and terms.price == 2_500_000


def test_honest_participants_are_paid_their_quote_when_others_buy_instead(
    market: TestClient, register, fund
) -> None:
    """Issue 24's attack: K* = (6 small, 1 large), large quoted 2.450980; the six small clients
    buy instead of joining and the large one trains. Re-priced at K = (0, 1) its reward is 0 (the
    old settlement paid it 0 and kept 3.294120); it is paid its quote from the buyers' money."""
    large = register(name="l", type_name="large", data_size=300, cost="3")
    smalls = [register(name=f"s{j}", type_name="small") for j in range(6)]
    quote = open_round_payload(
        price="0.549020", rewards={"small": "-0.392157", "large": "2.450980"}
    ).model_copy(update={"target_participants": {"small": 6, "large": 1}})
    in_transaction(market.app.state.sessions, lambda s: rounds.open_round(s, quote))
    r = market.put("/v1/rounds/1/decision", json={"strategy": "join"}, headers=large["auth"])
    assert r.status_code == 200, r.text
    for j, c in enumerate(smalls):
        fund(c["id"], "1")
        r = market.post(
            "/v1/purchases",
            json={"round_id": 1},
            headers={**c["auth"], "Idempotency-Key": f"small-buyer-{j:04d}"},
        )
        assert r.status_code == 201, r.text
    result = _settle(
        market,
        SettlePayload(
            round_id=1,
            rewards={"small": Decimal("-1.5"), "large": Decimal(0)},
            price=Decimal("0.549020"),
            participants=[large["id"]],
        ),
    )
    assert result.captured_rewards["large"] == Decimal("2.450980")
    assert _balance(market, large) == Decimal("2.450980")
    assert result.surplus == Decimal("0.843140") and result.subsidy == 0
    assert result.capture_rule is not None and "topped up to the quote" in result.capture_rule
    _balanced(market)
