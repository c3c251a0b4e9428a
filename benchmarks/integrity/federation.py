"""Attacks on the training federation, run on a real local federation (processes, TLS, keys).

Each function starts a fresh :class:`LocalFederation` (SuperLink, SuperNodes and resident trainers
as processes), mounts attacks against it and returns what happened, in the shape of
``out/bench/integrity.json`` (issue 13 item 7): per attack ``{"tried", "refused_or_caught",
"paid"}``, plus the honest participant-rounds and how many were flagged. "Paid" is the market
reward the rule would pay the attacker: none unless its updates were verified in every round it
was asked for (the training layer never pays; the round machine pays only those). The tests and
``make bench-integrity`` both call these functions.

- ``forged_node``: a SuperNode whose key nobody registered (claiming an honest node's type and
  index), and one with no key at all: refused at activation.
- ``identity_theft``: a registered node claiming another participant's identity in its node
  config (it is counted as itself, and its update fails the reported-data check); a request
  carrying the victim's public key signed with another key; a request for the victim's node id
  signed with the thief's own registered key (both answered 401).
- ``free_rider``, ``random_weights``, ``scaled_weights``, ``nan_weights``, ``label_flip``: a
  registered participant whose trainer is :mod:`benchmarks.integrity.adversary`: caught by
  verification (``label_flip`` also reports how many of its updates raised the validation loss
  beyond the verification's tolerance).
- ``dropout``: a SuperNode SIGKILLed in the middle of training: dropped, not paid; the others
  finish and the model is published.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import re
import ssl
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.integrity import adversary
from mots.training.config import TrainConfig
from mots.training.deployment import DeploymentError, run_app
from mots.training.federation import LocalFederation, alive, free_port_block, ports_needed
from mots.training.pki import load_node_key, make_node_key
from mots.training.verification import VerificationPolicy

VERIFICATION_ATTACKS = (
    "free_rider",
    "random_weights",
    "scaled_weights",
    "nan_weights",
    "label_flip",
)
FASHION = Path("/usr/share/datasets/fashion-mnist")


@dataclass
class Attack:
    """Tries of one attack and how many were refused or caught (and what was paid for them)."""

    tried: int = 0
    refused_or_caught: int = 0
    paid: str = "0"
    detail: list[str] = field(default_factory=list)
    extra: dict[str, int] = field(default_factory=dict)

    def add(self, caught: bool, note: str) -> None:
        """Count one try."""
        self.tried += 1
        self.refused_or_caught += int(caught)
        self.detail.append(("caught: " if caught else "MISSED: ") + note)

    def as_dict(self) -> dict[str, Any]:
        """The contract's fields, plus details."""
        return {
            "tried": self.tried,
            "refused_or_caught": self.refused_or_caught,
            "paid": self.paid,
            **self.extra,
            "detail": self.detail,
        }


@dataclass
class Outcome:
    """What a federation run measured: attacks, honest participant-rounds, timings."""

    attacks: dict[str, Attack] = field(default_factory=dict)
    honest_rounds: int = 0
    honest_flagged: int = 0
    published: list[bool] = field(default_factory=list)
    seconds: float = 0.0

    def attack(self, name: str) -> Attack:
        """The record of attack ``name`` (created empty)."""
        return self.attacks.setdefault(name, Attack())

    def merge(self, other: Outcome) -> Outcome:
        """Add another run's counts to this one."""
        for name, a in other.attacks.items():
            mine = self.attack(name)
            mine.tried += a.tried
            mine.refused_or_caught += a.refused_or_caught
            if a.paid != "0":
                mine.paid = a.paid if mine.paid == "0" else f"{mine.paid}; {a.paid}"
            mine.detail += a.detail
            for k, v in a.extra.items():
                mine.extra[k] = mine.extra.get(k, 0) + v
        self.honest_rounds += other.honest_rounds
        self.honest_flagged += other.honest_flagged
        self.published += other.published
        self.seconds += other.seconds
        return self


def config(counts: Sequence[int], rounds: int, seed: int = 0, local_steps: int = 20) -> TrainConfig:
    """A small training configuration on Fashion-MNIST for ``counts`` nodes per type."""
    return TrainConfig(
        data_dir=FASHION,
        sizes=(50, 120, 300)[: len(counts)],
        counts=tuple(counts),
        rounds=rounds,
        local_steps=local_steps,
        test_subset=500,
        seed=seed,
    )


def _port(n_nodes: int, extra: int = 0) -> int:
    return free_port_block(ports_needed(n_nodes) + extra, start=11000)


def _honest_rounds(data: dict[str, Any], honest: set[int], out: Outcome) -> None:
    for p in data.get("participant_status", []):
        if p["node_id"] in honest:
            out.honest_rounds += int(p["rounds_asked"])
            out.honest_flagged += int(p["status"] == "failed_verification")


def verification_attacks(
    workdir: Path,
    attacks: Sequence[str] = VERIFICATION_ATTACKS,
    *,
    rounds: int = 3,
    seed: int = 0,
    policy: VerificationPolicy | None = None,
) -> Outcome:
    """One honest node per type plus one attacking participant per attack, trained together."""
    honest_types = [0, 1, 2]
    attack_types = [i % 3 for i in range(len(attacks))]
    node_types = honest_types + attack_types
    argv = {
        3 + a: [sys.executable, str(Path(adversary.__file__).resolve()), "--attack", name]
        for a, name in enumerate(attacks)
    }
    counts = [node_types.count(i) for i in range(3)]
    pol = policy or VerificationPolicy(min_share=0.25)
    out = Outcome()
    start = time.perf_counter()
    with LocalFederation(
        n_nodes=len(node_types),
        node_types=node_types,
        superlink_port=_port(len(node_types)),
        workdir=workdir,
        policy=pol,
        trainer_argv=argv,
    ) as fed:
        ids = {int(n["node"]): int(n["node_id"]) for n in fed.nodes}
        data = run_app(fed, tuple(counts), config(counts, rounds, seed), policy=pol)
    status = {p["node_id"]: p for p in data["participant_status"]}
    for a, name in enumerate(attacks):
        p = status[ids[3 + a]]
        caught = p["status"] == "failed_verification"
        out.attack(name).add(caught, f"{p['status']} in round {p['left_in_round']}: {p['reason']}")
        if name == "label_flip":
            _label_flip_harm(out.attack(name), p, pol, caught)
    _honest_rounds(data, {ids[n] for n in range(3)}, out)
    out.published.append(bool(data.get("published")))
    out.seconds = time.perf_counter() - start
    return out


def _label_flip_harm(
    record: Attack, p: dict[str, Any], pol: VerificationPolicy, caught: bool
) -> None:
    """Count the tries (attackers) whose flipped updates raised the validation loss beyond the
    verification's tolerance, and how many of those were caught; and the updates themselves."""
    beyond = sum(
        1
        for c in p["checks"]
        if "val_loss" in c["stats"]
        and c["stats"]["val_loss"]
        > (1 + pol.loss_tolerance) * c["stats"]["val_loss_without"] + pol.loss_tolerance_abs
    )
    extra = record.extra
    extra["harmful_tries"] = extra.get("harmful_tries", 0) + int(beyond > 0)
    extra["harmful_caught"] = extra.get("harmful_caught", 0) + int(beyond > 0 and caught)
    extra["updates_beyond_tolerance"] = extra.get("updates_beyond_tolerance", 0) + beyond
    extra["updates_sent"] = extra.get("updates_sent", 0) + len(p["checks"])


def _fleet_call(
    fed: LocalFederation, path: str, message: Any, public_pem: bytes, signer: Any
) -> int:
    """POST a Fleet API request carrying ``public_pem`` and a timestamp signed by ``signer``."""
    import httpx
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec

    stamp = dt.datetime.now(dt.UTC).isoformat()
    signature = signer.sign(stamp.encode("ascii"), ec.ECDSA(hashes.SHA256()))
    headers = {
        "content-type": "application/protobuf",
        "flwr-public-key": base64.b64encode(public_pem).decode(),
        "flwr-timestamp": stamp,
        "flwr-signature": base64.b64encode(signature).decode(),
    }
    ca = ssl.create_default_context(cafile=str(fed.ca_cert))
    res = httpx.post(
        f"https://{fed.fleet_address}{path}",
        content=message.SerializeToString(),
        headers=headers,
        verify=ca,
        timeout=30,
    )
    return int(res.status_code)


def _private(path: Path) -> Any:
    from cryptography.hazmat.primitives import serialization

    return serialization.load_ssh_private_key(path.read_bytes(), None)


REFUSED = ("[code: 2001]", "has not admitted this node's key")
"""Log lines of a refused activation: Flower's (the node then exits), and the warm node's, which
asks again (mots.training.warm_node.wait_for_admission, 1e4579e)."""


def _refused(fed: LocalFederation, name: str, timeout: float = 60.0) -> tuple[bool, str]:
    """Wait for SuperNode ``name`` to exit or to be refused activation; (refused, last log line).
    A warm node asks again after a refused activation (a deployed node may start before its key
    is registered), so it may stay up: refused means never admitted (no node id), and either gone
    or refused by the SuperLink."""
    proc = next(p for p in fed.processes if p.name == name)
    log = Path(proc.log)
    deadline = time.monotonic() + timeout
    while alive(proc.pid) and time.monotonic() < deadline:
        if any(m in log.read_text(errors="replace") for m in REFUSED):
            break
        time.sleep(0.5)
    text = log.read_text(errors="replace")
    gone_or_refused = not alive(proc.pid) or any(m in text for m in REFUSED)
    refused = gone_or_refused and "SuperNode ID" not in text
    text = re.sub(r"\x1b\[[0-9;]*m", "", text)  # Flower colours its log
    lines = [
        ln
        for ln in text.splitlines()
        if "[code:" in ln or "Exit Code" in ln or "has not admitted" in ln
    ]
    return refused, " ".join(ln.strip() for ln in lines[-2:]) or text[-200:].strip()


def identity_attacks(workdir: Path, *, rounds: int = 2) -> Outcome:
    """Forged nodes and identity theft against two honest nodes (the victim is type 1, index 0)."""
    from flwr.proto.fleet_pb2 import ActivateNodeRequest, PullMessagesRequest
    from flwr.proto.node_pb2 import Node

    out = Outcome()
    start = time.perf_counter()
    base = _port(2, extra=3)
    with LocalFederation(n_nodes=2, node_types=[0, 1], superlink_port=base, workdir=workdir) as fed:
        victim = fed.nodes[0]
        claim = 'client-type="type-1" type-index=0 client-index=0'
        forged = fed.add_node(0, base + 4, register=False, node_config=claim, wait=False)
        ok, why = _refused(fed, f"supernode-{forged:02d}")
        out.attack("forged_node").add(ok, f"unregistered key claiming (type 1, index 0): {why}")
        keyless = fed.spawn_supernode("supernode-keyless", 0, claim, None, port=base + 5)
        ok, why = _refused(fed, keyless.name)
        out.attack("forged_node").add(ok, f"no key, claiming (type 1, index 0): {why}")
        thief = fed.add_node(1, base + 6, node_config=claim)
        theft = out.attack("identity_theft")
        victim_pem = load_node_key(fed.node_key_path(0)).public_pem
        other = make_node_key(workdir / "stolen" / "attacker.key")
        code = _fleet_call(
            fed,
            "/v1/fleet/activate-node",
            ActivateNodeRequest(public_key=victim_pem, heartbeat_interval=30.0),
            victim_pem,
            _private(other.private_key),
        )
        theft.add(code == 401, f"victim's public key, another key's signature: HTTP {code}")
        thief_key = load_node_key(fed.node_key_path(thief))
        code = _fleet_call(
            fed,
            "/v1/fleet/pull-messages",
            PullMessagesRequest(node=Node(node_id=int(victim["node_id"]))),
            thief_key.public_pem,
            _private(thief_key.private_key),
        )
        theft.add(code == 401, f"the victim's node id, the thief's own signature: HTTP {code}")
        pol = VerificationPolicy(min_share=0.5)
        data = run_app(fed, (1, 2), config([1, 2], rounds), policy=pol)
    status = {p["node_id"]: p for p in data["participant_status"]}
    v, t = status[int(victim["node_id"])], status[int(fed.nodes[thief]["node_id"])]
    counted_as_victim = (t["type_index"], t["client_index"]) == (0, 0)
    caught = (
        (v["type_index"], v["client_index"]) == (0, 0)
        and not counted_as_victim
        and t["status"] != "verified"
    )
    theft.add(
        caught,
        f"registered node claiming (type 1, index 0) in its node config: counted as type "
        f"{t['type_index'] + 1}, index {t['client_index']}; {t['status']}: {t['reason']}",
    )
    _honest_rounds(data, {int(n["node_id"]) for n in fed.nodes[:2]}, out)
    out.published.append(bool(data.get("published")))
    out.seconds = time.perf_counter() - start
    return out


def dropout(workdir: Path, *, rounds: int = 3, grace_s: float = 5.0) -> Outcome:
    """Three nodes train; the type-3 node is SIGKILLed once round 1 is done (the round's deadline
    comes ``grace_s`` after the other two replied, or 3× their time)."""
    out = Outcome()
    start = time.perf_counter()
    pol = VerificationPolicy(min_share=0.5, round_timeout_s=120.0, straggler_grace_s=grace_s)
    run_dir = workdir / "run"
    run_dir.mkdir(parents=True, exist_ok=True)
    with LocalFederation(
        n_nodes=3, node_types=[0, 1, 2], superlink_port=_port(3), workdir=workdir, policy=pol
    ) as fed:
        ids = [int(n["node_id"]) for n in fed.nodes]
        result: dict[str, Any] = {}

        def train() -> None:
            try:
                result.update(run_app(fed, (1, 1, 1), config([1, 1, 1], rounds), run_dir=run_dir))
            except DeploymentError as err:
                result.update({"error": str(err), **err.result})

        worker = threading.Thread(target=train)
        worker.start()
        progress = run_dir / "progress.jsonl"
        while worker.is_alive() and not _round_done(progress, 0):
            time.sleep(0.2)
        fed.kill_node(2)
        worker.join()
    status = {p["node_id"]: p for p in result.get("participant_status", [])}
    killed = status.get(ids[2], {})
    published = bool(result.get("published"))
    caught = published and killed.get("status") == "dropped" and "error" not in result
    out.attack("dropout").add(
        caught,
        f"published={published}; killed node: {killed.get('status')} in round "
        f"{killed.get('left_in_round')} ({killed.get('reason')}); "
        f"completed {result.get('completed_participants')}",
    )
    _honest_rounds(result, set(ids[:2]), out)
    out.published.append(published)
    out.seconds = time.perf_counter() - start
    return out


def _round_done(progress: Path, r: int) -> bool:
    if not progress.exists():
        return False
    for raw in progress.read_text().splitlines():
        line = json.loads(raw)
        if int(line["round"]) == r and not line.get("partial"):
            return True
    return False


def latency(workdir: Path, *, rounds: int = 3, repeats: int = 2) -> dict[str, Any]:
    """Mean FedAvg round time with TLS + authentication + verification and without, the same
    rounds on the same nodes, alternating to share the host's load; their ratio."""
    cfg = config([1, 1, 1], rounds)
    times: dict[str, list[float]] = {"secure": [], "plain": []}
    for rep in range(repeats):
        for mode in ("secure", "plain") if rep % 2 == 0 else ("plain", "secure"):
            secure = mode == "secure"
            pol = VerificationPolicy(verify=secure)
            with LocalFederation(
                n_nodes=3,
                node_types=[0, 1, 2],
                superlink_port=_port(3),
                workdir=workdir / f"{mode}-{rep}",
                secure=secure,
                policy=pol,
            ) as fed:
                data = run_app(fed, (1, 1, 1), cfg)
            times[mode] += [float(s) for s in data["round_seconds"]]
    secure_s = sum(times["secure"]) / len(times["secure"])
    plain_s = sum(times["plain"]) / len(times["plain"])
    return {
        "secure_round_s": secure_s,
        "plain_round_s": plain_s,
        "latency_ratio": secure_s / plain_s,
        "rounds": times,
    }
