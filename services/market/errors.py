"""The market's refusals as domain errors: which field, and the rule the request broke.

Domain code (purchases, decisions, idempotency) raises or returns these; only the API turns them
into HTTP answers (:mod:`services.market.api.errors`: a 404, 409, 422, 402, 401 or 503 whose body is
``{"detail": "<field>: <message>"}``). Tests of the domain code need no web framework.
"""

from __future__ import annotations


class Refusal(Exception):
    """A request the market refuses: ``field`` names what was wrong, ``message`` the rule;
    ``code`` is its problem code where it has its own (:mod:`mots.platform.problem_types`)."""

    code: str | None = None

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message

    @property
    def detail(self) -> str:
        """``<field>: <message>``, the text a client is shown."""
        return f"{self.field}: {self.message}"


class NotFound(Refusal):
    """What the request names does not exist (a round, a client)."""


class Conflict(Refusal):
    """The request contradicts the market's state (round not collecting, already bought, a key
    reused with another body, a paid buyer switching)."""


class OutOfRange(Refusal):
    """A number past its stated limit: a booking that would take an account's balance past
    :data:`~mots.platform.money.MAX_BALANCE_MICROS` (422, the account and the limit named)."""


class PaymentRequired(Refusal):
    """The wallet holds less than the request would move."""


class Unauthorized(Refusal):
    """The credential is not a registered client's."""


class BadEnrolmentCode(Unauthorized):
    """An enrolment code that is unknown, expired, revoked or used up."""

    code = "enrolment-code-invalid"


class CodeUsedUp(BadEnrolmentCode):
    """A live enrolment code with no registrations left: still 401 (the same answer as an unknown
    code), but not a guess, so the per-address throttle of failed codes does not count it."""


class Unavailable(Refusal):
    """The market cannot do it now (e.g. the ledger failed); the same request may be retried."""


class Forbidden(Refusal):
    """The credential is valid but lacks the right (a pending client declaring, a client token on
    an operator route)."""
