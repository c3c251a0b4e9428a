"""The arm64 edge image under QEMU emulation (`make deploy-test`'s `arm64` part).

``smoke`` runs the image as a Pi would start it, without a platform: the entry point's ``--help``,
``import torch, flwr`` (timed), and one FedAvg round's local work on a warm node (the edge
trainer's ``handle_train``: E SGD steps on this device's Fashion-MNIST partition, the data read
once, then timed again as the warm node does every round), the same on the amd64 image for the
comparison. Everything runs with the image's own user, read-only root and the data mounted
read-only, as compose runs it; nothing is left behind (``--rm``).
"""

from __future__ import annotations

import json
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

from tests.containers import images, podman
from tests.containers import round as rnd

DATA = Path("/usr/share/datasets/fashion-mnist")
# One FedAvg round's local work as docker/compose.yaml runs it (E = 20 steps of batch 32, type-1's
# 50 samples), timed after a first round that reads the data, as on a warm node.
TRAIN = """
import json, time
t = time.perf_counter()
import torch, flwr
imported = time.perf_counter() - t
from mots.training import datasets
from mots.training.config import TrainConfig
from mots.training.edge_trainer import handle_train
from mots.training.models import build_model
cfg = TrainConfig(data_dir="/var/lib/mots/data", rounds=2, local_steps=20, batch_size=32)
ds = datasets.load_dataset(cfg.dataset, cfg.data_dir)
w = [v.numpy() for v in build_model(cfg.model, ds.input_shape, ds.num_classes).state_dict().values()]
req = {"config": cfg.model_dump(mode="json"), "type_index": 0, "client_index": 0, "round": 0}
rounds = []
for r in range(3):
    t = time.perf_counter()
    w, metrics = handle_train(dict(req, round=r), w)
    rounds.append(time.perf_counter() - t)
import platform
print(json.dumps({"machine": platform.machine(), "torch": torch.__version__,
                  "flwr": flwr.__version__, "import_torch_flwr_s": imported,
                  "first_round_s": rounds[0], "warm_round_s": min(rounds[1:]),
                  "train_loss": metrics["train_loss"], "samples": metrics["samples"]}))
"""


def _run(image: str, arch: str, *args: str, entrypoint: str | None = None) -> str:
    """``podman run --rm`` of the image as compose runs an edge container; its stdout."""
    cmd = ["--rm", "--arch", arch, "--read-only", "--tmpfs", "/tmp", "--network", "none",
           "-v", f"{DATA}:/var/lib/mots/data:ro"]  # fmt: skip
    if entrypoint:
        cmd += ["--entrypoint", entrypoint]
    args_ = podman.run_args(*cmd, image, *args)
    return podman.podman(*args_[len(podman.FLAGS) + 1 :], timeout=900).stdout


def smoke(arch: str) -> dict[str, Any]:
    """The edge image of ``arch``: ``--help``, imports and a warm node's local round, timed."""
    image = images.image_ref("edge", arch)
    started = time.monotonic()
    helped = _run(image, arch, "--help")
    facts = json.loads(_run(image, arch, "-c", TRAIN, entrypoint="python").strip().splitlines()[-1])
    return facts | {
        "help_ok": "supernode" in helped and "run" in helped,
        "seconds": round(time.monotonic() - started, 1),
        "image": image,
    }


def part() -> dict[str, Any]:
    """The report's ``arm64`` entry: both edge images smoked (built first where missing), then
    the arm64 edge in a compose round (``in_round``); a failed round leaves the part incomplete."""
    for arch in ("amd64", "arm64"):
        if not podman.image_exists(images.image_ref("edge", arch)):
            images.build("edge", arch)
    got = {arch: smoke(arch) for arch in ("arm64", "amd64")}
    out: dict[str, Any] = {
        "smoke": got,
        "local_round_s": {arch: got[arch]["warm_round_s"] for arch in got},
    }
    try:
        round_ = in_round()
    except Exception as exc:  # the smoke stands; the round part is reported as not done
        return out | {"incomplete": f"round: {type(exc).__name__}: {exc}"[:1500]}
    held = round_["trained"] and round_["verified"] and round_["round_state"] == "published"
    held = held and round_["paid"] is not None and round_["paid"] == round_["quoted_reward"]
    return (
        out
        | round_
        | ({} if held else {"failed": "the arm64 edge was not trained, verified and paid"})
    )


def node_round_seconds(container: str) -> list[float]:
    """The node's seconds per FedAvg round as its own SuperNode log shows them: from each
    'Receiving: train message' to the next 'Sending: train message' (podman's timestamps)."""
    proc = podman.podman("logs", "--timestamps", container, check=False)
    out: list[float] = []
    received: datetime | None = None
    for line in (proc.stdout + proc.stderr).splitlines():
        if "train message" not in line:
            continue
        when = datetime.fromisoformat(line.split()[0][:26].rstrip("Z"))
        if "Receiving: train message" in line:
            received = when
        elif "Sending: train message" in line and received is not None:
            out.append(round((when - received).total_seconds(), 2))
            received = None
    return out


OVERRIDE = Path(__file__).with_name("compose.arm64.yaml")
PAIR = ("supernode-arm64", "agent-arm64")
NAME = "edge-arm64"


def client_type(override: Path = OVERRIDE) -> str:
    """The client type the arm64 device enrols as: the override's MOTS_EDGE_CLIENT_TYPE, read
    where it is set (one place), the same for both containers of the pair."""
    services = yaml.safe_load(override.read_text())["services"]
    found = {str(services[s]["environment"]["MOTS_EDGE_CLIENT_TYPE"]) for s in PAIR}
    if len(found) != 1:
        raise ValueError(f"{override}: the pair {PAIR} sets different client types {found}")
    return found.pop()


def _booked(stack: rnd.Stack, round_id: int, client_id: int) -> dict[str, str]:
    """The round's ledger transactions of one client: kind -> amount on its wallet."""
    op = stack.operator()
    try:
        page = op.transactions(limit=500, round_id=round_id, account=f"wallet:{client_id}")
    finally:
        op.close()
    return {
        t.kind: str(e.amount)
        for t in page.items
        for e in t.entries
        if e.account == f"wallet:{client_id}"
    }


def in_round(timeout: float = 1800) -> dict[str, Any]:
    """The compose stack with an arm64 edge pair added (compose.arm64.yaml); one market round;
    the arm64 node's part in it and its seconds per FedAvg round against the amd64 nodes'."""
    from tests.containers import compose, faults, standins
    from tests.docker.images import IMAGES

    standins.build_standins()
    for name in IMAGES:
        if not podman.image_exists(images.image_ref(name)):
            images.build(name)
    env_file, cli = compose.prepare()
    files = (OVERRIDE,)
    try:
        faults.up(*compose.DATA_TIER, env_file=env_file, overrides=files)
        compose.wait_healthy(compose.DATA_TIER, 120)
        faults.up(*compose.PLATFORM, env_file=env_file, overrides=files)
        compose.wait_healthy(compose.PLATFORM, 300)
        compose.enrol(cli)
        faults.up(*compose.EDGE, *PAIR, env_file=env_file, overrides=files)
        agents = tuple(s for s in (*compose.EDGE, *PAIR) if s.startswith("agent"))
        compose.wait_healthy(agents, 600)
        stack = rnd.Stack(cli["MOTS_MARKET_URL"], cli["MOTS_ORCHESTRATION_URL"],
                          cli["MOTS_OPERATOR_TOKEN"])  # fmt: skip
        me = rnd.wait_registered(stack, [NAME], 300)[0]
        code = rnd.enrol(stack, {"type-1": rnd.TYPES["type-1"]}, uses=2)["type-1"]
        buyer = rnd.buyer(stack, code, name="buyer-arm64")
        round_id = rnd.open_round(stack)
        rnd.buy_and_verify(buyer, round_id, Path("/dev/null"))
        end = rnd.wait_round(stack, round_id, timeout)
        model = compose.WORK / f"arm64-round-{round_id}.pt"
        verified_download = end["state"] == "published" and rnd.download(buyer, round_id, model)
        buyer.close()
        nodes = {s: node_round_seconds(compose.container(s))
                 for s in (*compose.EDGE, *PAIR) if s.startswith("supernode")}  # fmt: skip
        booked = _booked(stack, round_id, int(me["id"]))
        summary = end.get("summary") or {}
        verdict = (summary.get("verification") or {}).get(str(me["id"]))
        amd = [x for s, v in nodes.items() if s != PAIR[0] for x in v]
        arm = nodes[PAIR[0]]
        return {
            "round_id": round_id,
            "round_state": end["state"],
            "trained": bool(arm),
            "verdict": verdict,  # the round summary's: verified, dropped or failed_verification
            "verified": verdict == "verified",
            "quoted_reward": (summary.get("rewards") or {}).get(client_type()),
            "paid": booked.get("reward"),
            "booked": booked,
            "seconds_per_fedavg_round": max(arm) if arm else None,
            "amd64_seconds_per_fedavg_round": max(amd) if amd else None,
            "node_fedavg_seconds": nodes,
            "round_fedavg_seconds": end.get("fedavg_seconds"),
            "buyer_download_verified": verified_download,
            "ledger_balanced": rnd.ledger(stack)["balanced"],
        }
    finally:
        compose.save_logs()
        compose.down()
