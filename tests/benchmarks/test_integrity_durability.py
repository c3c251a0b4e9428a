"""Issue 37's rows of ``make bench-integrity`` (``benchmarks/integrity/durability.py``) on SQLite
and PostgreSQL: dead tokens after restarts, a burst after a quiet spell, forged X-Forwarded-For,
and honest rounds while the platform's PostgreSQL connections (the orchestration's, and the
market's where its ledger is on PostgreSQL) are terminated from the opening to the end."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.integrity import durability

pytestmark = [pytest.mark.integration]


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_every_row_is_caught_twice_and_nothing_is_paid(kind: str, tmp_path: Path) -> None:
    """Each row tried at least twice on each database, every try caught, nothing paid, no honest
    participant booked other than quoted, the ledger balanced."""
    result = durability.run(tmp_path, {"durability_databases": [kind]})
    rows = ["restart_revocation", "idle_burst", "xff_spoof", "db_connection_killed"]
    for name in rows:
        a = result.attacks[name]
        assert a["tried"] >= 2 and a["refused_or_caught"] == a["tried"], (name, a)
        assert a["paid"] == "0", (name, a)
    assert result.honest_flagged == 0 and result.honest_rounds > 0
    assert result.ledger_balanced is True
