"""One Alembic environment for every service: each keeps its revisions and its own version table."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import create_engine, inspect, text

from mots.platform.migrations import ENVIRONMENT
from services.evaluation.migrations import MIGRATIONS as EVALUATION
from services.market.migrations import MIGRATIONS as MARKET
from services.orchestration.migrations import MIGRATIONS as ORCHESTRATION

ROOT = Path(__file__).resolve().parents[3]
SERVICES = (MARKET, ORCHESTRATION, EVALUATION)


def test_the_services_share_the_environment_and_keep_only_their_revisions() -> None:
    """env.py and the revision template exist once, beside mots.platform.migrations."""
    assert (ENVIRONMENT / "env.py").is_file() and (ENVIRONMENT / "script.py.mako").is_file()
    assert sorted(ROOT.glob("services/*/alembic/env.py")) == []
    for service in SERVICES:
        assert service.versions == ROOT / "services" / service.service / "alembic" / "versions"
        assert sorted(service.versions.glob("0001_*.py"))


def test_services_sharing_a_database_each_record_their_own_head(tmp_path: Path) -> None:
    """Upgrading the three services on one SQLite file: every table, three version tables."""
    url = f"sqlite:///{tmp_path / 'shared.db'}"
    for service in SERVICES:
        service.upgrade(url)
    for service in SERVICES:  # a second start finds nothing to do
        service.upgrade(url)
    engine = create_engine(url)
    try:
        tables = set(inspect(engine).get_table_names())
        for service in SERVICES:
            assert set(service.metadata.tables) <= tables
            with engine.connect() as conn:
                heads = conn.execute(text(f"SELECT version_num FROM {service.version_table}"))
                assert len(heads.all()) == 1, service.service
    finally:
        engine.dispose()


def test_the_environment_refuses_to_run_without_the_connection() -> None:
    """Alembic's own command line (no connection passed) is refused with a pointer to upgrade()."""
    from alembic import command

    with pytest.raises(RuntimeError, match=r"migrations\.upgrade"):
        command.upgrade(MARKET.config(), "head")
