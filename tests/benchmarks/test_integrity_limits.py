"""Issue 37's rows of ``make bench-integrity`` (``benchmarks/integrity/market_limits.py``): a type
added between rounds, money past the ledger's limit, ids past int32/int64 and a model through debt,
each tried twice on SQLite and twice on PostgreSQL: every try caught, nothing paid, 0 server
errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.integrity import market_limits

pytestmark = [pytest.mark.integration]


def test_every_limit_row_is_caught_on_both_databases(tmp_path: Path) -> None:
    """Each row tried on both databases, all caught, paid 0, no 5xx."""
    result = market_limits.run(tmp_path, {})
    assert set(result.attacks) == {
        "type_added_between_rounds", "money_overflow", "id_overflow", "debt_model",
    }  # fmt: skip
    for name, row in result.attacks.items():
        assert row["tried"] >= 2 * market_limits.TRIES, name
        assert row["refused_or_caught"] == row["tried"], (name, row, result.extra)
        assert row["paid"] == "0" and row["server_errors"] == 0, (name, row)
    assert set(result.extra["by_database"]) == {"sqlite", "postgresql"}
