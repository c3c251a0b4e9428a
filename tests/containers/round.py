"""One market round driven from the host as an operator and a buyer would, on any stack.

The operator enrols the types (a code per type, as the README's steps do), the edge agents in
their containers register and declare by themselves, a buyer on the host registers, is funded,
buys while the round collects, and after publication downloads the model with its SHA-256
checked; then the ledger's invariants are asked. Used by the kube play, arm64 and network parts.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx

from mots.client.errors import ModelIntegrityError
from mots.client.market import MarketClient
from mots.platform.api.market import ClientRegistration, EnrolmentIn
from mots.platform.api.tasks import DEFAULT_TASK

# The paper testbed's types (k8s/overlays/k3s-pi/devices/type-*.env, the README's loop).
TYPES = {"type-1": (50, "0.5"), "type-2": (120, "1.2"), "type-3": (300, "3.0")}
TERMINAL = ("published", "settled_by_rule")


@dataclass
class Stack:
    """Where a stack's APIs answer from the host, and its operator token."""

    market: str
    orchestration: str
    operator_token: str

    def operator(self) -> MarketClient:
        """The market client with the operator's token."""
        return MarketClient(self.market, token=self.operator_token, timeout_s=30)

    def orch(self) -> httpx.Client:
        """The orchestration API with the operator's token."""
        auth = {"Authorization": f"Bearer {self.operator_token}"}
        return httpx.Client(base_url=self.orchestration, timeout=30, headers=auth)


def wait_healthy(url: str, timeout_s: float) -> None:
    """Poll ``url``/healthz until it answers 200."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            if httpx.get(f"{url}/healthz", timeout=3).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"{url}/healthz not healthy within {timeout_s}s")
        time.sleep(1)


def enrol(
    stack: Stack,
    types: dict[str, tuple[int, str]] = TYPES,
    uses: int = 10,
    task: str = DEFAULT_TASK,
) -> dict[str, str]:
    """One enrolment code per type of ``task`` (the operator's step before the agents start)."""
    op = stack.operator()
    try:
        return {
            t: op.enrol(
                EnrolmentIn(type_name=t, data_size=d, cost=Decimal(c), uses=uses, task=task)
            ).code
            for t, (d, c) in types.items()
        }
    finally:
        op.close()


def create_task(stack: Stack, task: str) -> None:
    """Store a shipped task at the market (`mots tasks create examples/tasks/TASK.yaml`)."""
    from mots.tasks.task_file import SHIPPED_DIR, inline_task_text

    op = stack.operator()
    try:
        op.create_task(inline_task_text(SHIPPED_DIR / f"{task}.yaml"))
    finally:
        op.close()


def registered(stack: Stack) -> list[dict[str, Any]]:
    """The clients the market has registered (operator's view)."""
    op = stack.operator()
    try:
        return [c.model_dump(mode="json") for c in op.clients()]
    finally:
        op.close()


def wait_registered(stack: Stack, names: list[str], timeout_s: float) -> list[dict[str, Any]]:
    """Until every named edge client is registered (agents register at their start)."""
    deadline = time.monotonic() + timeout_s
    while True:
        clients = registered(stack)
        if set(names) <= {c["name"] for c in clients}:
            return [c for c in clients if c["name"] in names]
        if time.monotonic() > deadline:
            got = sorted(c["name"] for c in clients)
            raise TimeoutError(f"registered {got}, waiting for {names}")
        time.sleep(2)


def buyer(stack: Stack, code: str, name: str = "buyer", funds: str = "10") -> MarketClient:
    """A host-side buyer: registered with an enrolment code, its wallet funded by the operator."""
    anon = MarketClient(stack.market, timeout_s=30)
    got = anon.register(ClientRegistration(name=name, enrolment_code=code))
    anon.close()
    op = stack.operator()
    op.deposit(got.id, Decimal(funds))
    op.close()
    return MarketClient(stack.market, token=got.token, timeout_s=30)


def open_round(stack: Stack, task: str | None = None, collect_seconds: float | None = None) -> int:
    """``POST /v1/rounds`` on the orchestration (the operator opens a round; of ``task``, with
    its own collection window, when given)."""
    body = {k: v for k, v in (("task", task), ("collect_seconds", collect_seconds)) if v}
    with stack.orch() as orch:
        r = orch.post("/v1/rounds", json=body) if body else orch.post("/v1/rounds")
        r.raise_for_status()
        return int(r.json()["round_id"])


def wait_round(stack: Stack, round_id: int, timeout_s: float) -> dict[str, Any]:
    """Poll the round until it ends by its rule; the body has ``fedavg_seconds`` added (the
    seconds of each finished FedAvg round, as ``training_progress`` reported them)."""
    deadline = time.monotonic() + timeout_s
    fedavg: dict[int, float] = {}
    with stack.orch() as orch:
        while True:
            try:
                body: dict[str, Any] = orch.get(f"/v1/rounds/{round_id}").json()
            except (httpx.HTTPError, ValueError):
                body = {"state": "unreachable"}
            progress = body.get("training_progress") or {}
            if progress and not progress.get("in_progress") and progress.get("fedavg_round"):
                fedavg[int(progress["fedavg_round"])] = float(progress["round_seconds"])
            if body["state"] in TERMINAL:
                return {**body, "fedavg_seconds": [fedavg[k] for k in sorted(fedavg)]}
            if time.monotonic() > deadline:
                raise TimeoutError(f"round {round_id}: {body['state']} after {timeout_s}s")
            time.sleep(1)


def buy_and_verify(client: MarketClient, round_id: int, dest: Path) -> dict[str, Any]:
    """Buy while the round collects; returns a closure's worth of facts after ``download``."""
    client.wait_for_quote(round_id, timeout_s=300, poll_s=0.5)
    purchase = client.buy(round_id)
    return {"purchase": purchase.model_dump(mode="json"), "dest": str(dest)}


def download(client: MarketClient, round_id: int, dest: Path) -> bool:
    """Download the published model; True when its SHA-256 matched the market's."""
    try:
        client.download_model(round_id, dest)
    except ModelIntegrityError:
        return False
    return True


def ledger(stack: Stack) -> dict[str, Any]:
    """The ledger's invariants (operator), with ``balanced`` = no unbalanced transaction, no
    mismatched account, total zero."""
    op = stack.operator()
    try:
        check = op.ledger_check().model_dump(mode="json")
    finally:
        op.close()
    balanced = (
        check["unbalanced_transactions"] == 0
        and check["mismatched_accounts"] == 0
        and Decimal(check["total"]) == 0
    )
    return {**check, "balanced": balanced}


def payouts(stack: Stack, round_id: int, summary: dict[str, Any]) -> dict[str, Any]:
    """Each participant of the round (the summary's verification, by client id): its name, type,
    verification, the reward SWAN set for its type (``captured_rewards``), the amounts booked to
    its wallet by the round's reward and charge transactions, and its wallet's balance (as
    tests/containers/compose.payouts reads them with the CLI)."""
    op = stack.operator()
    try:
        clients = {c.id: c for c in op.clients()}
        wallets = {a.client_id: str(a.balance) for a in op.accounts("wallets")}
        page = op.transactions(limit=500, round_id=round_id)
    finally:
        op.close()
    booked: dict[int, list[str]] = {}
    for tx in page.items:
        for entry in tx.entries if tx.kind in ("reward", "charge") else ():
            if entry.account.startswith("wallet:"):
                booked.setdefault(int(entry.account.split(":")[1]), []).append(str(entry.amount))
    rewards = (summary.get("settlement") or {}).get("captured_rewards") or {}
    out: dict[str, Any] = {}
    for cid, status in (summary.get("verification") or {}).items():
        client = clients[int(cid)]
        out[client.name] = {
            "client_id": int(cid),
            "task": client.task,
            "type": client.type_name,
            "verification": status,
            "reward": rewards.get(client.type_name),
            "booked": booked.get(int(cid), []),
            "wallet": wallets.get(int(cid)),
        }
    return out
