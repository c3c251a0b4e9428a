"""Fixtures of this folder's other tests, for the tests that reuse them: the round machine's SQL
wire (``test_replies``) and the SQL round store (``test_sql_store``)."""

from tests.services.orchestration.rounds.test_replies import wire  # noqa: F401
from tests.services.orchestration.rounds.test_sql_store import store  # noqa: F401
