"""The scheduled PostgreSQL backup as shipped (issue 39, deliverable 6): the k3s overlay's CronJob
and compose's postgres-backup service run the same docker/postgres/backup.sh on the same schedule
and retention, onto their own volume, and the suspended restore job runs restore.sh. The scripts
themselves are run against PostgreSQL by tests/services/market/test_backup_restore.py, and on the
compose deployment by the restore drill (`make restore-drill`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deploy.kustomize import render

ROOT = Path(__file__).resolve().parents[2]
COMPONENT = ROOT / "k8s/components/in-cluster-postgres"
WEEK_S = 7 * 24 * 3600


@pytest.fixture(scope="module")
def overlay() -> list[dict[str, Any]]:
    return render(ROOT / "k8s/overlays/k3s-pi")


def _env(container: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e.get("value", "<secret>") for e in container.get("env", [])}


def _cronjob(overlay: list[dict[str, Any]], name: str) -> dict[str, Any]:
    (job,) = [r for r in overlay if r["kind"] == "CronJob" and r["metadata"]["name"] == name]
    return job


@pytest.mark.parametrize("script", ["backup.sh", "restore.sh"])
def test_the_component_ships_the_compose_scripts(
    script: str, overlay: list[dict[str, Any]]
) -> None:
    """The CronJobs' ConfigMap holds docker/postgres's scripts byte for byte."""
    shipped = (ROOT / "docker/postgres" / script).read_text()
    assert (COMPONENT / script).read_text() == shipped
    (cm,) = [r for r in overlay if r["metadata"]["name"].startswith("postgres-backup-scripts")]
    assert cm["kind"] == "ConfigMap" and cm["data"][script] == shipped


def test_backups_are_scheduled_kept_a_week_and_never_overlap(overlay: list[dict[str, Any]]) -> None:
    """Every 6 h, one at a time, 28 sets (a week), on the postgres-backups claim, off the Pis,
    with the database password from mots-secrets."""
    job = _cronjob(overlay, "postgres-backup")
    assert (
        job["spec"]["schedule"] == "17 */6 * * *" and job["spec"]["concurrencyPolicy"] == "Forbid"
    )
    pod = job["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    assert c["command"] == ["/bin/sh", "/backup/backup.sh", "once"]
    env = _env(c)
    assert int(env["BACKUP_KEEP"]) * int(env["BACKUP_INTERVAL_S"]) == WEEK_S
    assert env["BACKUP_INTERVAL_S"] == str(6 * 3600)  # the schedule's period (fresh's bound)
    assert set(env["BACKUP_DATABASES"].split()) == {"market", "orchestration", "evaluation"}
    claims = {v["persistentVolumeClaim"]["claimName"] for v in pod["volumes"]
              if "persistentVolumeClaim" in v}  # fmt: skip
    assert claims == {"postgres-backups"}
    assert any(r["kind"] == "PersistentVolumeClaim" and r["metadata"]["name"] == "postgres-backups"
               for r in overlay)  # fmt: skip
    terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert {"key": "mots.io/edge", "operator": "DoesNotExist"} in (
        terms["nodeSelectorTerms"][0]["matchExpressions"]
    )


def test_the_restore_job_never_runs_by_itself(overlay: list[dict[str, Any]]) -> None:
    """postgres-restore is suspended and runs restore.sh on the backups' claim when started."""
    job = _cronjob(overlay, "postgres-restore")
    assert job["spec"]["suspend"] is True
    pod = job["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    assert pod["containers"][0]["command"] == ["/bin/sh", "/backup/restore.sh"]
    assert pod["restartPolicy"] == "Never"


def test_postgres_admits_the_backup_jobs(overlay: list[dict[str, Any]]) -> None:
    """The postgres NetworkPolicy's sources include the backup pods' name label."""
    (policy,) = [r for r in overlay if r["metadata"]["name"] == "postgres-ingress"]
    (expr,) = policy["spec"]["ingress"][0]["from"][0]["podSelector"]["matchExpressions"]
    for name in ("postgres-backup", "postgres-restore"):
        labels = _cronjob(overlay, name)["spec"]["jobTemplate"]["spec"]["template"]["metadata"]
        assert labels["labels"]["app.kubernetes.io/name"] in expr["values"]


def test_compose_backs_up_on_the_same_schedule() -> None:
    """compose's postgres-backup: backup.sh loop, the same period and retention as the CronJob,
    its own volume, healthy only while the newest set is fresh."""
    compose = yaml.safe_load((ROOT / "docker/compose.yaml").read_text())
    svc = compose["services"]["postgres-backup"]
    assert svc["command"] == ["/backup/backup.sh", "loop"]
    env = svc["environment"]
    assert int(env["BACKUP_KEEP"]) * int(env["BACKUP_INTERVAL_S"]) == WEEK_S
    assert env["BACKUP_INTERVAL_S"] == str(6 * 3600)
    assert (
        "postgres-backups:/backups" in svc["volumes"] and "postgres-backups" in compose["volumes"]
    )
    assert svc["healthcheck"]["test"] == ["CMD", "/backup/backup.sh", "fresh"]
    assert svc["depends_on"] == {"postgres": {"condition": "service_healthy"}}
