"""The non-binding quote attack (issue 13) against the real services with the market's ledger on
PostgreSQL (the SQLite run is tests/benchmarks/test_integrity_money.py): rounds off K* whose
re-priced terms lie beyond the quote move nothing beyond it, the subsidy stays within the
budget, and the ledger balances."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest

from benchmarks.integrity import money

pytestmark = pytest.mark.integration


def test_quote_overcharge_is_contained_on_postgresql(pg_url: str, tmp_path: Path) -> None:
    """Both rounds are tried and contained; re-pricing was beyond the quote in each (so the attack
    is real) and what was booked was not."""
    p = money.start(tmp_path, database_urls={"market": pg_url})
    try:
        a = money.ATTACKS["quote_overcharge"](p)
        assert a.tried == 2 and a.refused_or_caught == 2, a.details
        assert a.as_dict()["paid"] == "0"
        beyond = []
        for r in a.extra:
            quoted = {k: Decimal(v) for k, v in r["quoted_rewards"].items()}
            realised = {k: Decimal(str(v)) for k, v in r["realised_rewards"].items()}
            captured = {k: Decimal(v) for k, v in r["captured_rewards"].items()}
            beyond.append(
                any(realised[k] < min(q, 0) or realised[k] > max(q, 0) for k, q in quoted.items())
            )
            assert all(min(q, 0) <= captured[k] <= max(q, 0) for k, q in quoted.items())
            assert Decimal(r["subsidy"]) <= money.SUBSIDY_BUDGET
        assert all(beyond) and all(r["beyond_quote"] for r in a.extra), a.extra
        assert money.ledger_balanced(p)
    finally:
        money.stop(p)
