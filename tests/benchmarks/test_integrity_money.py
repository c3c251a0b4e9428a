"""The market's money attacks (``benchmarks/integrity/money.py``) on a freshly started platform
(four services, real Redis and Celery workers): each is refused or contained, nothing is paid
beyond a quote, and the ledger balances afterwards."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from benchmarks.integrity import money

pytestmark = [pytest.mark.integration]


@pytest.fixture(scope="module")
def platform(tmp_path_factory: pytest.TempPathFactory) -> Iterator[money.MoneyPlatform]:
    """One fresh platform with the honest population, shared by the attacks of this module."""
    p = money.start(tmp_path_factory.mktemp("money"))
    try:
        yield p
    finally:
        money.stop(p)


def _refused(a: money.Attack) -> None:
    assert a.tried > 0
    assert a.refused_or_caught == a.tried, a.details
    assert a.as_dict()["paid"] == "0"


def test_json_operations_cover_every_body_route(platform: money.MoneyPlatform) -> None:
    """The attack reaches the routes that take a body on each API (registration among them)."""
    doc = platform.market.get("/openapi.json").json()
    ops = {(m, p) for m, p, _ in money.json_operations(doc)}
    assert ("POST", "/v1/clients") in ops
    assert all("{" not in p for _, p in ops)


def test_non_finite_json_is_refused_on_every_route(platform: money.MoneyPlatform) -> None:
    """NaN, ±Infinity and 1e400 in any field of any body: 4xx problem+json, never 5xx/2xx."""
    _refused(money.ATTACKS["non_finite_json"](platform))
    assert money.ledger_balanced(platform)


def test_the_suite_reports_in_the_contracts_shape(tmp_path: Path) -> None:
    """run() on a fresh platform gives each named attack in the contract's keys and the ledger."""
    result = money.run(tmp_path, {"money_attacks": ["non_finite_json"]})
    entry = result.attacks["non_finite_json"]
    assert set(entry) >= {"tried", "refused_or_caught", "paid"}
    assert entry["tried"] == entry["refused_or_caught"] > 0 and entry["paid"] == "0"
    assert result.ledger_balanced is True
    assert result.honest_rounds > 0 and result.honest_flagged == 0


def test_paid_is_a_canonical_decimal_string() -> None:
    """What an attack was paid is written without exponent or trailing zeros."""
    a = money.Attack()
    a.record(False, "x", paid=money.Decimal("1.500000"))
    a.record(True)
    assert a.as_dict() == {"tried": 2, "refused_or_caught": 1, "paid": "1.5", "missed": ["x"]}
    assert money.Attack().as_dict()["paid"] == "0"


def test_quote_overcharge_is_contained(platform: money.MoneyPlatform) -> None:
    """Rounds off K* whose re-priced terms lie beyond the quote (checked here, so the attack is
    real): read from the wallets, nobody moved money beyond the quote, the subsidy stayed within
    the budget and the ledger balances."""
    a = money.ATTACKS["quote_overcharge"](platform)
    _refused(a)
    beyond = 0
    for r in a.extra:
        quoted = {k: money.Decimal(v) for k, v in r["quoted_rewards"].items()}
        for name, realised in (r["realised_rewards"] or {}).items():
            q, realised = quoted[name], money.Decimal(str(realised))
            beyond += int(realised < min(q, 0) or realised > max(q, 0))
        assert money.Decimal(r["subsidy"]) <= money.SUBSIDY_BUDGET
    assert beyond > 0 and all(r["beyond_quote"] for r in a.extra), a.extra
    assert any("bounded by the quote" in (r["capture_rule"] or "") for r in a.extra), a.extra
    assert money.ledger_balanced(platform)


def test_an_honest_round_at_k_star_is_booked_as_quoted(platform: money.MoneyPlatform) -> None:
    """Best responses to the quote settle at K*: every participant gets exactly its quoted
    reward, nothing is cut, and the subsidy is the quote's own incentive cost at K* (0 where the
    quote is budget-balanced, Theorem 3; after the attacks' rounds off K* the learned error model
    may quote a K* that costs a subsidy by design) and within budget."""
    h = money.honest_round(platform)
    assert h.participants > 0 and h.flagged == 0
    assert h.rule == "captured as realised"
    assert abs(h.subsidy - h.quoted_subsidy) <= money.Decimal("0.00001") * max(1, h.participants)
    assert h.subsidy <= money.SUBSIDY_BUDGET
    assert money.ledger_balanced(platform)


@pytest.mark.parametrize(
    "name",
    [
        "anonymous_registration",
        "greedy_declaration",
        "huge_data_size",
        "type_flood",
        "cross_client",
    ],
)
def test_attacks_on_attested_types_and_tokens_are_refused(
    platform: money.MoneyPlatform, name: str
) -> None:
    """Each attack of benchmarks/integrity/attested.py is refused every time it is tried, nothing
    is paid, and the ledger balances."""
    _refused(money.ATTACKS[name](platform))
    assert money.ledger_balanced(platform)
