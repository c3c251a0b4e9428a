"""rounds: the ten *_json text columns become typed JSON columns (JSONB on PostgreSQL)

Each product of a round (scenario, type_clients, quote, decisions, terms, training,
training_progress, evaluation, settlement, summary) moves from a text column ``<name>_json`` to a
JSON column ``<name>`` that the models bind to a pydantic model. Every existing row is carried
over: its JSON text is parsed and written to the new column (non-finite floats, which JSON cannot
carry, become the strings "NaN", "Infinity", "-Infinity" that pydantic reads back as floats).
The downgrade writes the JSON back as text.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-26 14:00:00
"""

from __future__ import annotations

import json
import math
from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

PRODUCTS = (
    "scenario",
    "type_clients",
    "quote",
    "decisions",
    "terms",
    "training",
    "training_progress",
    "evaluation",
    "settlement",
    "summary",
)


def _json() -> sa.types.TypeEngine[Any]:
    return sa.JSON(none_as_null=True).with_variant(
        postgresql.JSONB(none_as_null=True), "postgresql"
    )


def _safe(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, dict):
        return {k: _safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_safe(v) for v in value]
    return value


def _rounds() -> sa.TableClause:
    """The rounds table seen with both forms of every product column: text and JSON."""
    columns = [sa.column(f"{name}_json", sa.Text()) for name in PRODUCTS]
    columns += [sa.column(name, _json()) for name in PRODUCTS]
    return sa.table("rounds", sa.column("id", sa.Integer()), *columns)


def _copy(to_json: bool) -> None:
    """Copy every row's products between the text and the JSON columns."""
    rounds = _rounds()
    src = [f"{n}_json" for n in PRODUCTS] if to_json else list(PRODUCTS)
    dst = list(PRODUCTS) if to_json else [f"{n}_json" for n in PRODUCTS]
    conn = op.get_bind()
    rows = conn.execute(sa.select(rounds.c.id, *(rounds.c[c] for c in src))).all()
    for row in rows:
        values: dict[str, Any] = {}
        for s, d in zip(src, dst, strict=True):
            value = row._mapping[s]
            if value is None:
                values[d] = None
            elif to_json:
                values[d] = _safe(json.loads(value))
            else:
                values[d] = json.dumps(value)
        conn.execute(rounds.update().where(rounds.c.id == row.id).values(**values))


def upgrade() -> None:
    """Apply this revision."""
    with op.batch_alter_table("rounds", schema=None) as batch_op:
        for name in PRODUCTS:
            batch_op.add_column(sa.Column(name, _json(), nullable=True))
    _copy(to_json=True)
    with op.batch_alter_table("rounds", schema=None) as batch_op:
        for name in PRODUCTS:
            batch_op.drop_column(f"{name}_json")


def downgrade() -> None:
    """Revert this revision."""
    with op.batch_alter_table("rounds", schema=None) as batch_op:
        for name in PRODUCTS:
            batch_op.add_column(sa.Column(f"{name}_json", sa.Text(), nullable=True))
    _copy(to_json=False)
    with op.batch_alter_table("rounds", schema=None) as batch_op:
        for name in PRODUCTS:
            batch_op.drop_column(name)
