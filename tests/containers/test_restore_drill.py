"""The restore drill on the compose deployment (issue 39, item 6; tests/containers/restore.py, the
`restore` part of `make deploy-test` and `make restore-drill`): a round backed up by the scheduled
backup service, PostgreSQL's volume destroyed, the set restored, the books and the round read the
same. Long (a round and a restart of the data tier, several minutes): marked ``deploy``, so `make
test` leaves it out; it skips locally without podman, runc or the base (fails under CI=true)."""

from __future__ import annotations

import pytest

from tests.containers import compose, podman, report, restore
from tests.containers.base import base_image
from tests.containers.conftest import require_base

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(5400)]


@pytest.mark.deploy
def test_a_destroyed_database_restores_from_the_scheduled_backup(runtime: None) -> None:
    require_base(base_image("amd64"))
    try:
        got = restore.run()
    except Exception as exc:
        report.write_part("restore", {"error": f"{type(exc).__name__}: {exc}"[:2000]})
        raise
    report.write_part("restore", got)
    assert podman.leftovers([compose.PROJECT]) == {k: [] for k in podman.KINDS}
    assert all(n == 0 for n in got["tables_after_destroy"].values()), got
    assert got["tables_restored"]["market"] > 0 and got["round_state"] == "published"
    assert got["differ"] == [], got["differ"]
    assert got["ledger_balanced"] and got["rounds_readable"] and not got.get("failed")
