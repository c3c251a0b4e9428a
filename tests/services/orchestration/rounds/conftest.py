"""The round machine's SQL wire (``test_replies``) for the other tests of this folder."""

from tests.services.orchestration.rounds.test_replies import wire  # noqa: F401
