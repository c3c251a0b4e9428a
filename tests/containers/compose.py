"""The compose round: docker/compose.yaml started with podman-compose (the shipped file, with
tests/containers/compose.yaml's short-round override), every health check passing, then a market
round of each task (fashion-mnist and digits, opened at once) driven with the `mots` CLI as the
operator and a buyer of each task would, the edge agents and SuperNode containers doing the
participants' part over TLS with SuperNode authentication: each device is one client per task
(a code per task), trains both on its own folders on its one SuperNode.

Grafana is left out: it is not in Debian, no package index here ships its server, and its Go
module is AGPL (not to be used here), so no local stand-in exists (stated in the report).
"""

from __future__ import annotations

import hashlib
import json
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

from mots.platform.contracts import round_calls
from tests.containers import edge_data, images, podman, standins
from tests.containers.base import ROOT
from tests.docker.images import IMAGES

PROJECT = "mots-ct"
FILES = (ROOT / "docker" / "compose.yaml", Path(__file__).with_name("compose.yaml"))
DATA_TIER = ("redis", "postgres")
PLATFORM = (
    "market", "market-worker", "pricing", "orchestration", "orchestration-worker",
    "training-worker", "evaluation-worker", "superlink", "prometheus", "alertmanager",
)  # fmt: skip
DEVICES = ("1-0", "1-1", "2-0", "3-0")
# Each device: its SuperNode, its market agent and its node-exporter.
EDGE = tuple(
    f"{kind}-{d}" for d in DEVICES for kind in ("supernode", "agent", "node-exporter")
)  # fmt: skip
ALL_SERVICES = DATA_TIER + PLATFORM + EDGE
OVERRIDE_DEVICES = {"edge-1-2": "type-1", "edge-2-1": "type-2", "edge-3-1": "type-3",
                    "edge-arm64": "type-2"}  # fmt: skip
"""The devices compose.faults.yaml and compose.arm64.yaml add: their folders are made too."""
TYPES = {"type-1": (50, "0.5"), "type-2": (120, "1.2"), "type-3": (300, "3.0")}
TASKS = ("fashion-mnist", "digits")
"""The tasks every shipped device trains (edge_data.TASKS: its folders; a code file each)."""
DEFAULT_TASK = TASKS[0]
DIGITS_COLLECT_S = "20"
"""The digits round's collection window here (its task file's 30 s; fashion-mnist's override 20 s)."""
PORTS = {"market": 8000, "orchestration": 8001, "prometheus": 9090, "superlink": 9092,
         "alertmanager": 9093}  # fmt: skip
LEFT_OUT = {"grafana": "not in Debian; no reachable index ships its server; its Go module is AGPL"}
WORK = ROOT / "out" / "deploy" / "compose"
SECRETS = ROOT / "docker" / "secrets"
# The `mots` command beside this interpreter (the venv's entry point), as a user types it.
MOTS = [str(Path(sys.executable).with_name("mots"))]


def compose_env() -> dict[str, str]:
    """podman-compose's environment: podman's, without any MOTS_* or GRAFANA_* variable. Compose
    takes a variable from the environment over the --env-file, so under pytest (whose conftest
    sets the tests' public MOTS_OPERATOR_TOKEN and MOTS_TOKEN_SECRET) the services got those
    and refused to start outside the test environment; the env file alone must set them."""
    return {k: v for k, v in podman.env().items() if not k.startswith(("MOTS_", "GRAFANA_"))}


def compose(*args: str, env_file: Path, files: Sequence[Path] = FILES, timeout: float = 900) -> str:
    """Run podman-compose on the shipped file and the overrides, the values of ``env_file`` only
    (compose_env); return its output."""
    cmd = [sys.executable, "-m", "podman_compose", "-p", PROJECT, "--in-pod", "false"]
    cmd += ["--env-file", str(env_file)]
    for f in files:
        cmd += ["-f", str(f)]
    proc = subprocess.run(
        [*cmd, *args], env=compose_env(), capture_output=True, text=True, timeout=timeout
    )
    if proc.returncode != 0:
        raise RuntimeError(
            f"podman-compose {' '.join(args)}: {proc.stdout[-1500:]}{proc.stderr[-2500:]}"
        )
    return proc.stdout


def container(service: str) -> str:
    """podman-compose's container name for a service."""
    return f"{PROJECT}_{service}_1"


def wait_healthy(services: tuple[str, ...], timeout: float) -> dict[str, float]:
    """Run each container's health check (podman 4.3 here has no systemd timer to run them)
    until all pass; return the seconds each took. Raises with the failing ones' logs."""
    started = time.monotonic()
    pending = {s: container(s) for s in services}
    took: dict[str, float] = {}
    while pending:
        for service, name in list(pending.items()):
            if podman.podman("healthcheck", "run", name, check=False).returncode == 0:
                took[service] = round(time.monotonic() - started, 1)
                del pending[service]
        if pending and time.monotonic() - started > timeout:
            logs = {s: podman.podman("logs", "--tail", "15", n, check=False).stderr[-1200:]
                    + podman.podman("logs", "--tail", "15", n, check=False).stdout[-800:]
                    for s, n in pending.items()}  # fmt: skip
            raise TimeoutError(f"not healthy after {timeout:.0f} s: {logs}")
        time.sleep(3 if pending else 0)
    return took


def mots(*args: str, env: dict[str, str], timeout: float = 300) -> Any:
    """The `mots` CLI as a user types it (with --json); its parsed answer."""
    proc = subprocess.run(
        [*MOTS, *args, "--json"],
        env=env, capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip
    if proc.returncode != 0:
        raise RuntimeError(f"mots {' '.join(args)}: {proc.stdout[-800:]}{proc.stderr[-1500:]}")
    return json.loads(proc.stdout)


def prepare() -> tuple[Path, dict[str, str]]:
    """docker/.env's stand-in (random secrets, and MOTS_EDGE_DATA_ROOT: the devices' own data
    folders, made here as docs/deploy.md has an operator make them) and the operator's CLI
    environment."""
    for name, port in PORTS.items():
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                raise RuntimeError(f"127.0.0.1:{port} ({name}) is taken: compose publishes it")
    WORK.mkdir(parents=True, exist_ok=True)
    values = {
        "MOTS_DB_PASSWORD": secrets.token_hex(12),
        "MOTS_OPERATOR_TOKEN": secrets.token_urlsafe(24),
        "MOTS_TOKEN_SECRET": secrets.token_urlsafe(32),
        "GRAFANA_ADMIN_PASSWORD": secrets.token_urlsafe(12),
    }
    # each device's own data on "its host" (one host here): WORK/data/edge-<d>/<task>
    data = WORK / "data"
    shutil.rmtree(data, ignore_errors=True)
    devices = {f"edge-{d}": f"type-{d.split('-')[0]}" for d in DEVICES} | OVERRIDE_DEVICES
    edge_data.prepare(devices, {n: data / n for n in devices}, data / "split")
    values["MOTS_EDGE_DATA_ROOT"] = str(data)
    env_file = WORK / ".env"
    env_file.write_text("".join(f"{k}={v}\n" for k, v in values.items()))
    cli = dict(podman.env(), MOTS_MARKET_URL=f"http://127.0.0.1:{PORTS['market']}",
               MOTS_ORCHESTRATION_URL=f"http://127.0.0.1:{PORTS['orchestration']}",
               MOTS_OPERATOR_TOKEN=values["MOTS_OPERATOR_TOKEN"],
               MOTS_PROFILES=str(WORK / "profiles.toml"))  # fmt: skip
    (WORK / "profiles.toml").unlink(missing_ok=True)
    return env_file, cli


def code_file(type_name: str, task: str = DEFAULT_TASK) -> Path:
    """The compose secret's file of a type's code in a task (docker/compose.yaml's secrets)."""
    infix = "" if task == DEFAULT_TASK else f"{task}-"
    return SECRETS / f"enrolment-{infix}{type_name}.code"


def enrol(cli: dict[str, str], tasks: Sequence[str] = (DEFAULT_TASK,)) -> None:
    """The operator stores each task other than the default (`mots tasks create`) and enrols the
    three types in each of ``tasks`` (`mots market enrol --task`); their codes become the compose
    secrets the agents redeem (docker/secrets/, as docs/deploy.md says). A task not enrolled gets
    empty code files: the devices take no part in it."""
    SECRETS.mkdir(exist_ok=True)
    for task in TASKS:
        if task not in tasks:
            for name in TYPES:
                code_file(name, task).write_text("")
            continue
        if task != DEFAULT_TASK:
            mots("tasks", "create", str(ROOT / "examples" / "tasks" / f"{task}.yaml"), env=cli)
        for name, (size, cost) in TYPES.items():
            out = mots("market", "enrol", "--task", task, "--type", name, "--data-size",
                       str(size), "--cost", cost, "--uses", "10", env=cli)  # fmt: skip
            code_file(name, task).write_text(out["code"] + "\n")


def prometheus_targets() -> tuple[int, int]:
    """(targets up, targets) as Prometheus's own API reports them."""
    url = f"http://127.0.0.1:{PORTS['prometheus']}/api/v1/targets"
    with urllib.request.urlopen(url, timeout=10) as r:
        active = json.load(r)["data"]["activeTargets"]
    return sum(t["health"] == "up" for t in active), len(active)


def start_round(
    cli: dict[str, str],
    buyer_name: str = "buyer",
    open_args: Sequence[str] = (),
    task: str = DEFAULT_TASK,
) -> dict[str, Any]:
    """A buyer of ``task`` (registered with the task's type-1 code) is funded, the operator opens
    a round of the task (`mots rounds open --task TASK OPEN_ARGS`), the buyer reads its quote (its
    task's latest round) and buys while the round collects."""
    code = code_file("type-1", task).read_text().strip()
    buyer = mots("market", "register", "--name", buyer_name, "--code", code,
                 "--save-as", buyer_name, env=cli)  # fmt: skip
    mots("market", "deposit", str(buyer["id"]), "10", env=cli)
    round_id = mots("rounds", "open", "--task", task, *open_args, env=cli)["round_id"]
    as_buyer = dict(cli, MOTS_PROFILE=buyer_name)
    quote = mots("market", "quote", "--wait", "60", env=as_buyer)
    purchase = mots("market", "buy", str(round_id), env=as_buyer)
    return {"round_id": round_id, "task": task, "buyer": buyer_name, "quote": quote,
            "purchase": purchase, "opened_at": time.monotonic()}  # fmt: skip


def finish_round(cli: dict[str, str], started: dict[str, Any], timeout: float) -> dict[str, Any]:
    """Wait until the round :func:`start_round` opened ends by its rule (trained on the SuperNode
    containers, evaluated, settled); the buyer downloads the model (SHA-256 verified by the CLI,
    and again here). ``seconds``: from its opening to its end, as seen here (5 s polls)."""
    round_id = started["round_id"]
    deadline = time.monotonic() + timeout
    view = mots("rounds", "show", str(round_id), env=cli)
    while view["state"] not in ("published", "settled_by_rule") and time.monotonic() < deadline:
        time.sleep(5)
        view = mots("rounds", "show", str(round_id), env=cli)
    seconds = round(time.monotonic() - started["opened_at"], 1)
    got: dict[str, Any] = {"verified": False}  # a round settled by rule has no model
    if view["state"] == "published":
        model = WORK / f"mots-round-{round_id}.pt"
        as_buyer = dict(cli, MOTS_PROFILE=started["buyer"])
        got = mots("market", "download", str(round_id), "--out", str(model), env=as_buyer)
        digest = hashlib.sha256(model.read_bytes()).hexdigest()
        got["verified"] = digest == got["sha256"] and model.stat().st_size == got["size"]
    return {k: v for k, v in started.items() if k != "opened_at"} | {
        "view": view, "download": got, "seconds": seconds,
    }  # fmt: skip


def drive_round(
    cli: dict[str, str],
    timeout: float,
    buyer_name: str = "buyer",
    open_args: Sequence[str] = (),
    task: str = DEFAULT_TASK,
) -> dict[str, Any]:
    """One round of ``task`` from its opening to the buyer's verified download
    (:func:`start_round`, then :func:`finish_round`)."""
    return finish_round(cli, start_round(cli, buyer_name, open_args, task), timeout)


def drive_rounds(cli: dict[str, str], tasks: Sequence[str], timeout: float) -> dict[str, Any]:
    """A round of each task opened at once (each with its own buyer, ``buyer`` for the default
    task and ``buyer-<task>`` for another; digits collecting :data:`DIGITS_COLLECT_S` s), then
    each finished: task -> its round's facts. On the deployment's one SuperLink the rounds train
    at once (each acquires its coalition's keys, the SuperLink admits their union, each Flower
    run has its own node map; a device in both serves both runs' messages in turn)."""
    started = [
        start_round(
            cli,
            "buyer" if task == DEFAULT_TASK else f"buyer-{task}",
            () if task == DEFAULT_TASK else ("--collect-seconds", DIGITS_COLLECT_S),
            task,
        )
        for task in tasks
    ]
    return {s["task"]: finish_round(cli, s, timeout) for s in started}


def ledger(cli: dict[str, str]) -> dict[str, Any]:
    """`mots market ledger-check` (it exits 1 when a check fails, with its JSON printed first) and
    ``balanced``: no unbalanced transaction, no mismatched account, total zero. Its ``accounts``
    are totals per category, so what each client was paid is read by :func:`payouts`."""
    proc = subprocess.run(
        [*MOTS, "market", "ledger-check", "--json"],
        env=cli, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    try:
        check = json.loads(proc.stdout)
    except ValueError as exc:
        raise RuntimeError(
            f"mots market ledger-check: {proc.stdout[-800:]}{proc.stderr[-1500:]}"
        ) from exc
    balanced = (
        check["unbalanced_transactions"] == 0
        and check["mismatched_accounts"] == 0
        and Decimal(check["total"]) == 0
    )
    return {"balanced": balanced and proc.returncode == 0, "check": check}


def payouts(cli: dict[str, str], round_id: int, summary: dict[str, Any]) -> dict[str, Any]:
    """Each participant of the round (the summary's verification, by client id) with what the
    operator's ledger routes show: its type, verification, the reward SWAN set for its type
    (``captured_rewards``), the amounts booked to its wallet by the round's reward and charge
    transactions (`mots market transactions --round`) and its wallet's balance (`mots market
    accounts --category wallets`). The edge clients hold nothing else, so a paid participant's
    wallet equals its one booking."""
    clients = {c["id"]: c for c in mots("market", "clients", env=cli)}
    wallets = {a["client_id"]: a["balance"]
               for a in mots("market", "accounts", "--category", "wallets", env=cli)}  # fmt: skip
    page = mots("market", "transactions", "--round", str(round_id), "--limit", "500", env=cli)
    booked: dict[int, list[str]] = {}
    for tx in page["items"]:
        for entry in tx["entries"] if tx["kind"] in ("reward", "charge") else ():
            if entry["account"].startswith("wallet:"):
                booked.setdefault(int(entry["account"].split(":")[1]), []).append(entry["amount"])
    rewards = (summary.get("settlement") or {}).get("captured_rewards") or {}
    out: dict[str, Any] = {}
    for cid, status in (summary.get("verification") or {}).items():
        client = clients[int(cid)]
        out[client["name"]] = {
            "client_id": int(cid),
            "type": client["type_name"],
            "verification": status,
            "reward": rewards.get(client["type_name"]),
            "booked": booked.get(int(cid), []),
            "wallet": wallets.get(int(cid)),
        }
    return {"participants": out, "more_pages": page["next"] is not None}


def up(
    env_file: Path,
    cli: dict[str, str],
    files: Sequence[Path],
    edge: Sequence[str],
    tasks: Sequence[str] = (DEFAULT_TASK,),
) -> dict[str, float]:
    """Start the tiers in order (each healthy before the next), enrol the types of ``tasks``,
    start the edge; return each service's seconds to healthy (the SuperNodes' are waited for
    after a round)."""
    compose("up", "-d", *DATA_TIER, env_file=env_file, files=files)
    health = wait_healthy(DATA_TIER, 120)
    compose("up", "-d", *PLATFORM, env_file=env_file, files=files)
    health |= wait_healthy(PLATFORM, 300)
    enrol(cli, tasks)
    compose("up", "-d", *edge, env_file=env_file, files=files)
    return health | wait_healthy(tuple(s for s in edge if s.startswith(("agent", "node-"))), 300)


def up_and_round(
    env_file: Path,
    cli: dict[str, str],
    files: Sequence[Path],
    edge: Sequence[str],
    timeout: float,
    tasks: Sequence[str] = TASKS,
) -> dict[str, Any]:
    """Start the tiers in order (each healthy before the next), enrol, start the edge, run a
    round of each of ``tasks`` at once; return the default task's round's facts, ``tasks`` (each
    task's) and each service's seconds to healthy."""
    health = up(env_file, cli, files, edge, tasks)
    rounds = drive_rounds(cli, tasks, timeout)
    result = dict(rounds[DEFAULT_TASK], tasks=rounds)
    # every SuperNode serving after the round (none exited while waiting for its key); its check
    # needs no round, but the host's load during start-up can hold it past its 5 s timeout
    health |= wait_healthy(tuple(s for s in edge if s.startswith("supernode")), 300)
    restarts = {s: restart_count(s) for s in edge}
    return result | {"healthy_after_s": health, "restarts": restarts}


def restart_count(service: str) -> int:
    """How often podman restarted the service's container (its restart policy)."""
    out = podman.podman("inspect", container(service), "--format", "{{.RestartCount}}").stdout
    return int(out.strip() or 0)


def task_result(cli: dict[str, str], got: dict[str, Any]) -> dict[str, Any]:
    """One task's round as the report keeps it: its state, participants with what each was paid
    (:func:`payouts`), the buyer's purchase and verified download, its seconds."""
    view = got["view"]
    summary = view.get("summary") or {}
    paid = payouts(cli, got["round_id"], summary)
    return {
        "round_id": got["round_id"],
        "round_state": view["state"],
        "seconds": got["seconds"],
        "participants": paid["participants"],
        "paid": {n: p["booked"] for n, p in paid["participants"].items()},
        "quote": got["quote"],
        "purchase": got["purchase"],
        "download": got["download"],
        "summary": summary,
        "round_calls": round_calls(view.get("calls") or []),
    }


def run_round(
    timeout: float = 1500,
    *,
    extra_files: Sequence[Path] = (),
    extra_edge: Sequence[str] = (),
    tasks: Sequence[str] = TASKS,
) -> dict[str, Any]:
    """The whole compose check; everything it created is removed before it returns or raises.
    ``extra_files`` are further compose overrides (after tests/containers/compose.yaml) and
    ``extra_edge`` the services they add to the edge tier (agents named ``agent-*``, SuperNodes
    ``supernode-*``), e.g. an arm64 edge device. ``tasks``: a round of each, opened at once
    (the top-level keys are the default task's round, ``tasks`` each task's)."""
    started = time.monotonic()
    standins.build_standins()
    built = {name: images.build(name)["build_s"] for name in IMAGES}  # cached layers: seconds
    env_file, cli = prepare()
    files = (*FILES, *extra_files)
    try:
        result = up_and_round(env_file, cli, files, (*EDGE, *extra_edge), timeout, tasks)
        books = ledger(cli)
        up, total = prometheus_targets()
        per_task = {t: task_result(cli, got) for t, got in result["tasks"].items()}
        default = per_task[DEFAULT_TASK]  # the top-level keys: the default task's round
        return {
            **{k: v for k, v in default.items() if k not in ("round_id", "quote", "seconds")},
            "ledger_balanced": books["balanced"],
            "ledger": books["check"],
            "prometheus_targets_up": up,
            "prometheus_targets": total,
            "seconds": round(time.monotonic() - started, 1),
            "image_build_s": built,
            "healthy_after_s": result["healthy_after_s"],
            "restarts": result["restarts"],
            "calls": result["view"].get("calls") or [],
            "left_out": LEFT_OUT,
            "tasks": per_task,
        }
    finally:
        save_logs()
        down()


def save_logs() -> None:
    """Each project container's log in out/deploy/compose/logs/ (kept after cleanup, for a
    failed round's diagnosis)."""
    logs = WORK / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    for name in podman.leftovers([PROJECT])["containers"]:
        got = podman.podman("logs", "--tail", "400", name, check=False, timeout=60)
        (logs / f"{name}.log").write_text(got.stdout + got.stderr)


def down() -> dict[str, list[str]]:
    """Remove the project's containers (with their anonymous volumes), named volumes and networks,
    and the codes written; return what is left. `podman-compose down` is not used: with podman
    4.3's restart policy and no systemd, its `podman stop` hangs here, `podman rm --force` does not."""
    try:
        return podman.remove([PROJECT])
    finally:
        for name in TYPES:
            for task in TASKS:
                code_file(name, task).unlink(missing_ok=True)
