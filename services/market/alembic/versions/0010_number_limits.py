"""Number limits in the schema: round ids within int32, balances within MAX_BALANCE_MICROS

The API refuses (422) any round id past ``MAX_ID`` = 2^31 − 1 and any booking that would take a
balance past ``MAX_BALANCE_MICROS`` = 10^18 − 1 (issue 37); this revision makes the database
refuse them too, so no path that forgets a check can store them: PostgreSQL's ``int4`` already
stops at 2^31 − 1, but SQLite's INTEGER holds 64 bits, and a SQLite sum past 2^63 becomes a float.

- ``market_rounds.id``, ``round_members.round_id`` and ``ledger_transactions.round_id``: 1 to
  2^31 − 1 (decisions, purchases and tallies refer to ``market_rounds``).
- ``accounts.balance_micros``: −(10^18 − 1) to 10^18 − 1, an integer.

PostgreSQL: named CHECK constraints. SQLite cannot add a constraint to a table without copying
it (which its foreign keys make unsafe here), so there the same conditions are triggers that
abort the insert or update (``RAISE(ABORT)``, an IntegrityError like a CHECK's).

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-29 09:30:00
"""

from __future__ import annotations

from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

MAX_ID = 2**31 - 1
MAX_BALANCE_MICROS = 10**18 - 1
CHECKS = {
    "ck_market_rounds_id_int32": ("market_rounds", "id", f"{{c}} BETWEEN 1 AND {MAX_ID}"),
    "ck_round_members_round_id_int32": (
        "round_members",
        "round_id",
        f"{{c}} BETWEEN 1 AND {MAX_ID}",
    ),
    "ck_ledger_transactions_round_id_int32": (
        "ledger_transactions",
        "round_id",
        f"{{c}} IS NULL OR {{c}} BETWEEN 1 AND {MAX_ID}",
    ),
    "ck_accounts_balance_limit": (
        "accounts",
        "balance_micros",
        f"{{c}} BETWEEN -{MAX_BALANCE_MICROS} AND {MAX_BALANCE_MICROS}",
    ),
}
"""Constraint name → (table, column, the condition every row must meet; ``{c}`` the column)."""


def _trigger(name: str, event: str, table: str, column: str, condition: str) -> str:
    """SQLite: abort the statement (AFTER: a rowid alias is only known then) when the row fails
    the condition or its value is not an integer (SQLite's overflow of a sum is a float)."""
    new = condition.format(c=f"NEW.{column}")
    kinds = "('integer', 'null')" if "IS NULL" in condition else "('integer')"
    return (
        f"CREATE TRIGGER {name}_{event.lower()} AFTER {event} ON {table} "
        f"WHEN NOT (typeof(NEW.{column}) IN {kinds} AND ({new})) "
        f"BEGIN SELECT RAISE(ABORT, '{name}: {table}.{column} must meet "
        f"{condition.format(c=column)}'); END"
    )


def upgrade() -> None:
    """Apply this revision."""
    sqlite = op.get_bind().dialect.name == "sqlite"
    for name, (table, column, condition) in CHECKS.items():
        if not sqlite:
            check = condition.format(c=column)
            op.execute(f"ALTER TABLE {table} ADD CONSTRAINT {name} CHECK ({check})")
            continue
        for event in ("INSERT", "UPDATE"):
            op.execute(_trigger(name, event, table, column, condition))


def downgrade() -> None:
    """Revert this revision."""
    sqlite = op.get_bind().dialect.name == "sqlite"
    for name, (table, _column, _condition) in CHECKS.items():
        if not sqlite:
            op.execute(f"ALTER TABLE {table} DROP CONSTRAINT {name}")
            continue
        for event in ("insert", "update"):
            op.execute(f"DROP TRIGGER {name}_{event}")
