"""No built-in secret (issue 24): the services refuse a missing, short or public secret outside the
tests; `mots platform up`'s workdir secrets are generated once, private and reused; the
revocation list every service reads (real Redis) names dead tokens within its refresh."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from mots.local.keys import SECRETS_FILE, workdir_secrets
from mots.platform.settings import DEV_OPERATOR_TOKEN, DEV_TOKEN_SECRET, PlatformSettings

GOOD = {"operator_token": "o" * 32, "token_secret": "k" * 32}


@pytest.fixture
def bare_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("MOTS_OPERATOR_TOKEN", "MOTS_TOKEN_SECRET", "MOTS_ENVIRONMENT"):
        monkeypatch.delenv(name, raising=False)


@pytest.mark.usefixtures("bare_env")
def test_no_secret_is_built_in() -> None:
    """Without MOTS_OPERATOR_TOKEN/MOTS_TOKEN_SECRET a service does not start: the rule named."""
    with pytest.raises(ValidationError, match="MOTS_OPERATOR_TOKEN: not set"):
        PlatformSettings()
    with pytest.raises(ValidationError, match="MOTS_TOKEN_SECRET: not set"):
        PlatformSettings(operator_token=GOOD["operator_token"])  # type: ignore[arg-type]


@pytest.mark.usefixtures("bare_env")
@pytest.mark.parametrize("environment", ["development", "production"])
@pytest.mark.parametrize(
    ("field", "public"),
    [("operator_token", DEV_OPERATOR_TOKEN), ("token_secret", DEV_TOKEN_SECRET)],
)
def test_the_public_test_secrets_are_refused_outside_the_tests(
    environment: str, field: str, public: str
) -> None:
    with pytest.raises(ValidationError, match="public value is refused"):
        PlatformSettings(environment=environment, **{**GOOD, field: public})  # type: ignore[arg-type]
    admitted = PlatformSettings(environment="test", **{**GOOD, field: public})  # type: ignore[arg-type]
    assert getattr(admitted, field).get_secret_value() == public


@pytest.mark.usefixtures("bare_env")
def test_a_short_secret_is_refused() -> None:
    with pytest.raises(ValidationError, match="shorter than 16"):
        PlatformSettings(**{**GOOD, "token_secret": "short"})  # type: ignore[arg-type]
    assert PlatformSettings(**GOOD).environment == "development"  # type: ignore[arg-type]


def test_workdir_secrets_are_generated_once_private_and_reused(tmp_path: Path) -> None:
    first, created = workdir_secrets(tmp_path)
    assert created and (tmp_path / SECRETS_FILE).stat().st_mode & 0o777 == 0o600
    assert len(first.operator_token) >= 32 and len(first.token_secret) >= 48
    assert first.operator_token != DEV_OPERATOR_TOKEN and first.token_secret != DEV_TOKEN_SECRET
    again, created = workdir_secrets(tmp_path)
    assert again == first and not created
    other, _ = workdir_secrets(tmp_path / "other")
    assert other.operator_token != first.operator_token
    assert other.token_secret != first.token_secret


def _env_example() -> dict[str, str]:
    example = Path(__file__).resolve().parents[3] / "docker" / ".env.example"
    lines = (ln.strip() for ln in example.read_text().splitlines())
    return dict(ln.split("=", 1) for ln in lines if ln and not ln.startswith("#"))


@pytest.mark.usefixtures("bare_env")
@pytest.mark.parametrize(
    ("field", "var"),
    [("operator_token", "MOTS_OPERATOR_TOKEN"), ("token_secret", "MOTS_TOKEN_SECRET")],
)
def test_the_env_example_placeholders_are_refused(field: str, var: str) -> None:
    """docker/.env.example's values (`change-me-…`) are public too: a deployment that copied the
    file without changing them does not start (attack: the file's token key forges any token)."""
    placeholder = _env_example()[var]
    with pytest.raises(ValidationError, match="placeholder"):
        PlatformSettings(**{**GOOD, field: placeholder})  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="placeholder"):
        PlatformSettings(**{**GOOD, field: placeholder.upper() + "-2"})  # type: ignore[arg-type]


@pytest.mark.usefixtures("bare_env")
def test_the_env_example_database_password_is_refused() -> None:
    """A database URL carrying docker/.env.example's password is refused by every service."""
    from services.evaluation.core.config import Settings as Evaluation
    from services.market.core.config import Settings as Market
    from services.orchestration.core.config import Settings as Orchestration

    password = _env_example()["MOTS_DB_PASSWORD"]
    url = f"postgresql+psycopg://mots:{password}@postgres:5432/market"
    for service in (Market, Orchestration, Evaluation):
        with pytest.raises(ValidationError, match=r"MOTS_DATABASE_URL: .*placeholder"):
            service(database_url=url, **GOOD)  # type: ignore[arg-type]
        ok = service(database_url=url.replace(password, "s3cret-of-our-own"), **GOOD)  # type: ignore[arg-type]
        assert ok.database_url.endswith("@postgres:5432/market")
