"""Issue 37, deliverable 7, on the market's side: every database use on a round's path (the
opening, the declarations' progress, the close, the settlement that publishes) meets a terminated
PostgreSQL connection, at its first statement and inside its transaction, and is run again on a
fresh one: each answers what the same call answers on an untouched twin database, and the two
ledgers hold the same postings and balances, balanced to the micro-unit."""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pytest
from sqlalchemy.orm import Session

from mots.platform.contracts import SettlePayload
from mots.platform.db import in_transaction
from services.market import ledger, rounds
from tests.services.dropped import killing
from tests.services.market.conftest import open_round_payload
from tests.services.market.test_purchases import OPEN, Market
from tests.services.market.test_settlement import _books, _round
from tests.services.market.test_settlement import second_url as second_url


def _stages(market: Market) -> list[tuple[str, Callable[[Session], Any]]]:
    """A round's calls at the market, in the order the orchestration makes them (as the
    market worker's handlers run them: one :func:`in_transaction` each)."""
    ids = list(market.clients.values())
    payload = SettlePayload(
        round_id=OPEN,
        rewards={"small": Decimal("4.0")},
        participants=ids[:4],
        dropped=[],
        refund_buyers=False,
        price=Decimal("2.0"),
        artifact_path="/models/round-2.pt",
    )

    def settle(s: Session) -> Any:
        result = rounds.settle_round(s, payload)
        rounds.publish(s, OPEN)
        return result

    return [
        ("collection", lambda s: rounds.progress(s, OPEN)),
        ("close", lambda s: rounds.close_round(s, OPEN)),
        ("settle", settle),
        ("opening", lambda s: rounds.open_round(s, open_round_payload(OPEN + 1)).id),
        ("collection of the next", lambda s: rounds.progress(s, OPEN + 1)),
    ]


def test_every_round_call_at_the_market_survives_a_terminated_connection(
    database_url: str, second_url: str
) -> None:
    """Each call's first statement and third (inside the retry's transaction) meet a terminated
    backend; each answers as on the twin, and the books are the twin's, balanced."""
    if not database_url.startswith("postgresql"):
        pytest.skip("an embedded SQLite database has no connection to terminate")
    killed, twin = _round(database_url), _round(second_url)
    try:
        for (stage, work), (_, same) in zip(_stages(killed), _stages(twin), strict=True):
            with killing(killed.engine, lambda n, _s: n in (1, 3)) as met:
                got = in_transaction(killed.sessions, work)
            assert len(met) == 2, stage
            assert got == in_transaction(twin.sessions, same), stage
        assert _books(killed) == _books(twin)
        with killed.sessions() as s:
            check = ledger.check(s)
        assert check.unbalanced_transactions == 0 and check.mismatched_accounts == 0
        assert Decimal(check.total) == 0
    finally:
        killed.engine.dispose()
        twin.engine.dispose()
