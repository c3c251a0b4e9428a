"""Issue 24, item 1: ``make bench-integrity``'s removal rows on the Flower engine
(:mod:`benchmarks.integrity.flower_removals`): a participant revoked or departed while its round
collects or trains on the local federation is never paid, and the ledger balances."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.integrity import flower_removals

pytestmark = [pytest.mark.integration]


def test_removed_participants_unpaid_on_flower(tmp_path: Path) -> None:
    """Both rows: every try (collecting, training) caught, nothing paid, the ledger balanced."""
    result = flower_removals.run(tmp_path, {})
    for row in flower_removals.ROWS.values():
        a = result.attacks[row]
        assert a["tried"] == 2 and a["refused_or_caught"] == 2, (row, a)
        assert a["paid"] == "0", (row, a)
    assert result.ledger_balanced
