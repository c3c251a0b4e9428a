"""market_rounds.state: one round state enum for the orchestration and the market (issue 38)

The market's own round states (``closed``, ``settled``, ``refunded``) are written as the
platform's :class:`~mots.platform.api.base.RoundState` they always showed as (``GET /v1/quote``):
``training``, ``settling`` and ``settled_by_rule``; ``collecting`` and ``published`` keep their
value. Existing rows are rewritten, so every stored round stays readable; downgrade writes the
old names back.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-29 06:40:00
"""

from __future__ import annotations

from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

RENAMED = {"closed": "training", "settled": "settling", "refunded": "settled_by_rule"}
"""The market's old state names and the round state each is now stored as."""


def _rename(pairs: dict[str, str]) -> None:
    for old, new in pairs.items():
        op.execute(f"UPDATE market_rounds SET state = '{new}' WHERE state = '{old}'")


def upgrade() -> None:
    _rename(RENAMED)


def downgrade() -> None:
    _rename({new: old for old, new in RENAMED.items()})
