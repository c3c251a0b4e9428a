"""The restore drill (issue 39, deliverable 6): `make restore-drill`, and the `restore` part of
`make deploy-test` (out/deploy/report.json's ``restore{ledger_balanced, rounds_readable}``).

On the compose deployment as shipped, with the scheduled backup service (postgres-backup, running
docker/postgres/backup.sh) on a short interval: a real market round (deposits, a purchase, the
round trained on the SuperNode containers, settled, published, the model downloaded), the market's
and the orchestration's records read over their APIs (:func:`snapshot`); the services stopped and
the next scheduled backup set awaited; then PostgreSQL stopped and every file of its volume
deleted (podman removes neither the volume nor the container while the services' containers
require it), the server started again (a fresh initdb: empty databases, proven empty), the set restored with docker/postgres/restore.sh
as docs/deploy.md tells the operator (`compose run --rm postgres-backup /backup/restore.sh`), the
services started again and everything read once more. The drill passes when the two readings are
equal to the byte (:func:`compare`): `ledger-check` balanced and the same, every account, ledger
transaction and client the same, every round the same in both services, and every published model
downloadable with the same SHA-256.

The same :func:`snapshot` and :func:`compare` judge the fast check in make test
(tests/services/market/test_backup_restore.py: the scripts against the machine's PostgreSQL).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import time
import tomllib
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx

from tests.containers import compose, images, podman, standins
from tests.docker.images import IMAGES

OVERRIDE = Path(__file__).with_name("compose.restore.yaml")
BACKUP = "postgres-backup"
# What writes to PostgreSQL: stopped before the last backup, started after the restore.
WRITERS = ("market", "market-worker", "orchestration", "orchestration-worker",
           "training-worker", "evaluation-worker")  # fmt: skip
DATABASES = ("market", "orchestration", "evaluation")


def _pages(http: httpx.Client, path: str, headers: dict[str, str]) -> list[Any]:
    """Every item of a paged list route (``items`` and ``next``), in the route's order."""
    items: list[Any] = []
    params: dict[str, str | int] = {"limit": 200}
    while True:
        r = http.get(path, params=params, headers=headers)
        r.raise_for_status()
        body = r.json()
        items += body["items"]
        if not body["next"]:
            return items
        params["cursor"] = body["next"]


def _get(http: httpx.Client, path: str, headers: dict[str, str]) -> Any:
    """A route's JSON body, or its status code when it is not a 200 (compared as such)."""
    r = http.get(path, headers=headers)
    return r.json() if r.status_code == 200 else {"status": r.status_code}


def snapshot(
    market: httpx.Client,
    operator: dict[str, str],
    downloads: dict[int, dict[str, str]],
    orchestration: httpx.Client | None = None,
) -> dict[str, Any]:
    """What a restore must bring back, read over the APIs: the market's ledger check, accounts,
    transactions (with entries) and clients; each round of ``downloads`` (round id -> the
    headers of a client entitled to its model): its quote, model info and the downloaded
    model's SHA-256 and size; with ``orchestration``, its list of rounds and each round's view."""
    rounds: dict[str, Any] = {}
    for rid, auth in sorted(downloads.items()):
        r = market.get(f"/v1/rounds/{rid}/model", headers=auth)
        model = (
            {"sha256": hashlib.sha256(r.content).hexdigest(), "size": len(r.content),
             "header": r.headers.get("X-Model-SHA256")}
            if r.status_code == 200 else {"status": r.status_code}
        )  # fmt: skip
        rounds[str(rid)] = {
            "quote": _get(market, f"/v1/rounds/{rid}/quote", auth),
            "info": _get(market, f"/v1/rounds/{rid}/model/info", auth),
            "model": model,
        }
    out = {
        "ledger": _get(market, "/v1/ledger/check", operator),
        "accounts": _pages(market, "/v1/ledger/accounts", operator),
        "transactions": _pages(market, "/v1/ledger/transactions", operator),
        "clients": _pages(market, "/v1/clients", operator),
        "rounds": rounds,
    }
    if orchestration is not None:
        listed = _get(orchestration, "/v1/rounds", operator)
        out["orchestration"] = {
            "list": listed,
            "views": {
                str(rid): _get(orchestration, f"/v1/rounds/{rid}", operator) for rid in downloads
            },
        }
    return out


def balanced(check: dict[str, Any]) -> bool:
    """`ledger-check`'s invariants: no unbalanced transaction, no mismatched account, total 0."""
    return (
        check.get("unbalanced_transactions") == 0
        and check.get("mismatched_accounts") == 0
        and Decimal(str(check.get("total"))) == 0
    )


def compare(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """The drill's verdict: ``ledger_balanced`` (the restored ledger checks balanced and equals
    the backed-up one: check, accounts, transactions, clients), ``rounds_readable`` (every round
    reads the same and its model downloads with the same digest) and the keys that differ."""
    books = ("ledger", "accounts", "transactions", "clients")
    differ = [k for k in before if before[k] != after.get(k)]
    models = [r["model"] for r in after["rounds"].values()]
    return {
        "ledger_balanced": balanced(after["ledger"]) and not set(differ) & set(books),
        "rounds_readable": bool(models)
        and all("sha256" in m and m["sha256"] == m["header"] for m in models)
        and not set(differ) & {"rounds", "orchestration"},
        "differ": differ,
        "transactions": len(after["transactions"]),
        "rounds": sorted(int(r) for r in after["rounds"]),
    }


def _sets() -> list[str]:
    """The complete backup sets in the backup service's volume, oldest first."""
    got = podman.podman("exec", compose.container(BACKUP), "sh", "-c",
                        "ls -1 /backups | grep -E '^[0-9]{8}T[0-9]{6}Z$' | sort")  # fmt: skip
    return got.stdout.split()


def _wait_set_after(stamp: str, timeout: float = 180) -> str:
    """The first scheduled backup set newer than ``stamp`` (UTC, backup.sh's format)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        newer = [s for s in _sets() if s > stamp]
        if newer:
            return newer[0]
        time.sleep(3)
    raise TimeoutError(f"no scheduled backup after {stamp} within {timeout:.0f} s")


def _tables(db: str) -> int:
    """How many tables database ``db`` of the compose PostgreSQL holds."""
    sql = "select count(*) from information_schema.tables where table_schema = 'public'"
    got = podman.podman("exec", compose.container("postgres"), "psql", "-U", "mots", "-d", db,
                        "-tAc", sql)  # fmt: skip
    return int(got.stdout.strip())


def _wait_serving(timeout: float = 120) -> None:
    """Until the fresh server answers on TCP. Its socket-only health check passes already while
    the entrypoint's temporary first-start server runs the init script (seen: it then shut down
    under the drill's next query)."""
    deadline = time.monotonic() + timeout
    check = ["exec", compose.container("postgres"), "pg_isready", "-h", "127.0.0.1", "-U", "mots"]
    while podman.podman(*check, check=False).returncode != 0:
        if time.monotonic() > deadline:
            raise TimeoutError(f"PostgreSQL not serving on TCP within {timeout:.0f} s")
        time.sleep(2)


def _clients(cli: dict[str, str]) -> tuple[httpx.Client, httpx.Client, dict[str, str]]:
    """The market and orchestration APIs from the host, with the operator's headers."""
    operator = {"Authorization": f"Bearer {cli['MOTS_OPERATOR_TOKEN']}"}
    market = httpx.Client(base_url=cli["MOTS_MARKET_URL"], timeout=60)
    return market, httpx.Client(base_url=cli["MOTS_ORCHESTRATION_URL"], timeout=60), operator


def _destroy_and_restore(env_file: Path, stamp: str) -> dict[str, Any]:
    """Stop PostgreSQL and delete everything in its volume (podman refuses to remove the volume or
    the container while the services' containers require it), start it again (a fresh server:
    its databases counted empty), and restore set ``stamp`` with the backup service's image
    (`compose run --rm`), as docs/deploy.md tells the operator."""
    postgres = compose.container("postgres")
    podman.podman("stop", "--time", "10", postgres, timeout=120)
    volume = f"{compose.PROJECT}_postgres-data"
    mount = Path(
        podman.podman("volume", "inspect", "--format", "{{.Mountpoint}}", volume).stdout.strip()
    )
    files = sum(1 for _ in mount.rglob("*"))
    for child in mount.iterdir():
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child)
        else:
            child.unlink()
    podman.podman("start", postgres, timeout=120)
    _wait_serving()
    empty = {db: _tables(db) for db in DATABASES}
    started = time.monotonic()
    compose.compose("run", "--rm", "--no-deps", BACKUP, "/backup/restore.sh", stamp,
                    env_file=env_file, files=_files())  # fmt: skip
    restored = {db: _tables(db) for db in DATABASES}
    return {"volume_files_deleted": files, "tables_after_destroy": empty,
            "tables_restored": restored, "restore_s": round(time.monotonic() - started, 1)}  # fmt: skip


def _files() -> tuple[Path, ...]:
    return (*compose.FILES, OVERRIDE)


def drill(cli: dict[str, str], env_file: Path, timeout: float) -> dict[str, Any]:
    """The drill on a started deployment (compose.up done): round, backup, destroy, restore."""
    compose.compose("up", "-d", "--no-deps", BACKUP, env_file=env_file, files=_files())
    compose.wait_healthy((BACKUP,), 120)
    result = compose.drive_round(cli, timeout)
    rid = int(result["round_id"])
    profiles = tomllib.loads(Path(cli["MOTS_PROFILES"]).read_text())["profiles"]
    buyer = {"Authorization": f"Bearer {profiles['buyer']['token']}"}
    market, orch, operator = _clients(cli)
    with market, orch:
        before = snapshot(market, operator, {rid: buyer}, orch)
        podman.podman("stop", "--time", "10", *map(compose.container, WRITERS), timeout=180)
        stopped = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        stamp = _wait_set_after(stopped)
        kept = _sets()
        podman.podman("stop", "--time", "5", compose.container(BACKUP), timeout=60)
        facts = _destroy_and_restore(env_file, stamp)
        podman.podman("start", *map(compose.container, WRITERS), timeout=180)
        compose.wait_healthy(WRITERS, 300)
        after = snapshot(market, operator, {rid: buyer}, orch)
    for name, got in (("before", before), ("after", after)):  # for a failed drill's diagnosis
        (compose.WORK / f"restore-{name}.json").write_text(json.dumps(got, indent=1))
    check = compose.ledger(cli)  # `mots market ledger-check`, as the operator runs it
    verdict = compare(before, after)
    verdict["ledger_balanced"] = verdict["ledger_balanced"] and check["balanced"]
    return (
        verdict
        | facts
        | {
            "round_state": result["view"]["state"],
            "backup_set": stamp,
            "sets_kept": len(kept),
            "ledger": check["check"],
        }
    )


def run(timeout: float = 1500) -> dict[str, Any]:
    """The whole drill on the compose deployment; everything created is removed before it returns
    or raises. ``failed`` when the restored books or rounds differ from the backed-up ones."""
    started = time.monotonic()
    standins.build_standins()
    for name in IMAGES:
        images.build(name)  # cached layers: seconds
    env_file, cli = compose.prepare()
    try:
        compose.up(env_file, cli, _files(), compose.EDGE)
        got = drill(cli, env_file, timeout)
        got["seconds"] = round(time.monotonic() - started, 1)
        if not (got["ledger_balanced"] and got["rounds_readable"] and got["sets_kept"] <= 3):
            got["failed"] = True
        return got
    finally:
        compose.save_logs()
        compose.down()
