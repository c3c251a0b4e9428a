"""The rendered k3s-pi overlay run with `podman kube play` and a market round published on it.

Steps (each as the README's k3s section has the user do it, where podman allows): render with the
real kustomize; create the Secrets with the README's `kubectl create secret` commands (their
output stored as podman 4.3 reads secrets) and the SuperLink's TLS material with
`python -m mots.training.pki tls`; give each emulated node its directories (the server's
dataset, each Pi's own data per task, its agent state, owned by uid 10001); play the claims,
then the pods in order (kube_translate.playbook) on a podman network of their own, each at its
static address; run every probe by hand until all pass; store the digits task and enrol the
types in both tasks (docs/deploy.md step 7: Secret `enrolment`, keys type-N and type-N.digits);
start the edge pods (each Pi one client per task on its one SuperNode); open a round of each
task at once, buy as a host-side buyer of each task, wait for both rounds to end by their rule,
download and verify each model, check the ledger and what each participant was paid.
Everything it made is removed in ``finally``.
"""

from __future__ import annotations

import secrets as pysecrets
import shutil
import socket
import ssl
import subprocess
import sys
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import yaml

from tests.containers import edge_data, podman, standins
from tests.containers import round as market_round
from tests.containers.kube_translate import (
    NOT_EXPRESSIBLE,
    PREFIX,
    WORKLOADS,
    Playbook,
    kubectl_config_map,
    kubectl_secret,
    playbook,
    secret_for_env,
    secret_for_volume,
)
from tests.deploy.kustomize import Resource, containers, render, unhashed

ROOT = Path(__file__).resolve().parents[2]
NETWORK = PREFIX + "net"  # PREFIX: tests/containers/run.py's PREFIXES see everything made here
SUBNET = "10.89.201.0/24"
DATASET = Path("/usr/share/datasets/fashion-mnist")
DEVICES = ROOT / "k8s/overlays/k3s-pi/devices"
EDGE_NODES = {"supernode": ["pi-01", "pi-11", "pi-16"]}
DEVICE_FILES = {"pi-01": "type-1", "pi-11": "type-2", "pi-16": "type-3"}
"""Which shipped device file (k8s/overlays/k3s-pi/devices/) each emulated Pi is prepared with."""
TLS_HOSTS = ["superlink-fleet", "superlink-fleet.mots.svc", "superlink-fleet.mots.svc.cluster.local",
             "superlink-control", "superlink-control.mots.svc",
             "superlink-control.mots.svc.cluster.local", "127.0.0.1", "localhost"]  # fmt: skip


SECRETS = ("mots-secrets", "superlink-tls", "enrolment")
TASKS = ("fashion-mnist", "digits")
"""The tasks the Pis train (the DaemonSet's --data; edge_data.TASKS); a round of each."""
DIGITS_COLLECT_S = 20.0
"""The digits round's collection window here (the compose round's)."""


def readme_secrets(workdir: Path) -> dict[str, tuple[Resource, str]]:
    """The Secrets of the README's steps 4 and 5 (by their k3s names), each with how podman must
    store it."""
    pw = pysecrets.token_hex(16)
    url = f"postgresql+psycopg://mots:{pw}@postgres:5432"
    mots = kubectl_secret(
        "mots-secrets",
        f"--from-literal=operator-token={pysecrets.token_hex(24)}",
        f"--from-literal=token-secret={pysecrets.token_hex(32)}",
        f"--from-literal=postgres-password={pw}",
        f"--from-literal=market-database-url={url}/market",
        f"--from-literal=orchestration-database-url={url}/orchestration",
        f"--from-literal=evaluation-database-url={url}/evaluation",
        f"--from-literal=grafana-admin-password={pysecrets.token_hex(12)}",
    )
    tls = workdir / "tls"
    hosts = [a for h in TLS_HOSTS for a in ("--host", h)]
    subprocess.run([sys.executable, "-m", "mots.training.pki", "tls", str(tls), *hosts],
                   check=True, capture_output=True, timeout=60)  # fmt: skip
    superlink_tls = kubectl_secret(
        "superlink-tls",
        f"--from-file=ca.crt={tls / 'ca.crt'}",
        f"--from-file=tls.crt={tls / 'server.crt'}",
        f"--from-file=tls.key={tls / 'server.key'}",
    )
    return {"mots-secrets": (mots, "env"), "superlink-tls": (superlink_tls, "volume")}


def create_secret(name: str, secret: Resource, how: str, workdir: Path) -> None:
    """Store one Secret in podman's secret store in the form its use needs (env or volume)."""
    path = workdir / f"secret-{name}.json"
    path.write_text(secret_for_env(secret) if how == "env" else secret_for_volume(secret))
    path.chmod(0o600)
    podman.podman("secret", "create", name, str(path))
    path.unlink()


def _edge(book: Playbook, name: str) -> bool:
    """Whether the played pod ``name`` is an edge pod (a SuperNode DaemonSet's)."""
    return book.k3s_name(name).startswith("supernode-")


def prepare_nodes(root: Path, book: Playbook) -> None:
    """Each emulated node's disk: the server's dataset; a Pi's own data (/srv/mots/<task>), agent
    state and device file (the overlay's devices/<type>.env as shipped, at
    /etc/mots/device/device.env)."""
    server = root / "server/var/lib/mots/dataset"
    server.mkdir(parents=True)
    for f in DATASET.iterdir():
        shutil.copy2(f, server / f.name)
    pis = []
    for name, _, _ in book.pods:
        if not _edge(book, name):
            continue
        pi = book.k3s_name(name).removeprefix("supernode-")  # supernode-pi-01 -> pi-01
        pis.append(pi)
        node = root / pi
        (node / "var/lib/mots/agent").mkdir(parents=True)
        device = node / "etc/mots/device"
        device.mkdir(parents=True)
        shutil.copy2(DEVICES / f"{DEVICE_FILES[pi]}.env", device / "device.env")
    # each Pi's own data, one folder per task at /srv/mots/<task> (docs/deploy.md)
    devices = {pi: DEVICE_FILES[pi] for pi in pis}
    edge_data.prepare(devices, {pi: root / pi / "srv/mots" for pi in pis}, root / "split")
    shutil.rmtree(root / "split", ignore_errors=True)  # none cut for a tier without edge pods
    subprocess.run(["chown", "-R", "10001:10001", str(root)], check=True)


def play(name: str, doc: Resource, ip: str, config_maps: list[Path], workdir: Path) -> None:
    """`podman kube play` one pod (a Deployment or a Pod) at its static address."""
    path = workdir / f"{name}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    cms = [a for p in config_maps for a in ("--configmap", str(p))]
    podman.podman("kube", "play", "--network", NETWORK, "--ip", ip, *cms, str(path), timeout=300)


def _port(c: dict[str, Any], port: int | str) -> int:
    if isinstance(port, int):
        return port
    return int(next(p["containerPort"] for p in c["ports"] if p.get("name") == port))


def probe_ok(pod: str, c: dict[str, Any], probe: dict[str, Any], ip: str) -> bool:
    """Run one probe as the kubelet would: HTTP(S) and TCP from outside the pod (the host, at
    the pod's address), exec inside the container, gRPC health from the host."""
    try:
        if "httpGet" in probe:
            g = probe["httpGet"]
            url = f"{g.get('scheme', 'HTTP').lower()}://{ip}:{_port(c, g['port'])}{g['path']}"
            return httpx.get(url, verify=False, timeout=5).status_code < 400
        if "tcpSocket" in probe:
            socket.create_connection((ip, _port(c, probe["tcpSocket"]["port"])), 5).close()
            return True
        if "exec" in probe:
            cmd = probe["exec"]["command"]
            return podman.podman("exec", f"{pod}-{c['name']}", *cmd, check=False,
                                 timeout=30).returncode == 0  # fmt: skip
        if "grpc" in probe:
            return _grpc_serving(ip, int(probe["grpc"]["port"]))
    except (httpx.HTTPError, OSError, ssl.SSLError, subprocess.TimeoutExpired):
        return False
    raise ValueError(f"{pod}/{c['name']}: unknown probe {sorted(probe)}")


def _grpc_serving(ip: str, port: int) -> bool:
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    with grpc.insecure_channel(f"{ip}:{port}") as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        try:
            got = stub.Check(health_pb2.HealthCheckRequest(), timeout=5)
        except grpc.RpcError:
            return False
        return bool(got.status == health_pb2.HealthCheckResponse.SERVING)


def wait_probes(book: Playbook, names: list[str], timeout_s: float) -> dict[str, str]:
    """Every probe of the named pods' containers, run until each passes; name -> 'ok'/'failed'."""
    todo = {}
    for name, doc, ip in book.pods:
        if name not in names:
            continue
        for c in containers(doc):
            for kind in ("startupProbe", "readinessProbe", "livenessProbe"):
                if kind in c:
                    todo[f"{name}/{c['name']}/{kind}"] = (name, c, c[kind], ip)
    result = {k: "failed" for k in todo}
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and "failed" in result.values():
        for key, (pod, c, probe, ip) in todo.items():
            if result[key] == "failed" and probe_ok(pod, c, probe, ip):
                result[key] = "ok"
        time.sleep(2)
    return result


def _volumes_of(pod: str) -> set[str]:
    """Named and anonymous volumes the pod's containers mount (kube play makes one per emptyDir,
    configMap and secret volume as well as per claim)."""
    ids = podman.podman("ps", "-a", "-q", "--filter", f"pod={pod}", check=False).stdout.split()
    if not ids:
        return set()
    fmt = "{{range .Mounts}}{{.Name}} {{end}}"
    out = podman.podman("inspect", "--format", fmt, *ids, check=False).stdout
    return set(out.split())


def save_logs(book: Playbook, logs: Path) -> None:
    """Each played container's log tail in ``logs`` (kept after cleanup: a failed probe's or
    round's diagnosis, e.g. a SuperNode refusing its data)."""
    logs.mkdir(parents=True, exist_ok=True)
    for pod, _, _ in book.pods:
        names = podman.podman("ps", "-a", "--filter", f"pod={pod}", "--format", "{{.Names}}",
                              check=False).stdout.split()  # fmt: skip
        for name in names:
            got = podman.podman("logs", "--tail", "200", name, check=False, timeout=60)
            (logs / f"{name}.log").write_text(got.stdout + got.stderr)


def cleanup(book: Playbook | None, workdir: Path) -> list[str]:
    """Remove every pod, volume, secret and the network this part made; what could not go."""
    volumes: set[str] = set()
    if book is not None:
        save_logs(book, workdir.with_name(workdir.name + "-logs"))
        for name, _, _ in book.pods:
            volumes |= _volumes_of(name)
            podman.podman("pod", "rm", "--force", "--time", "2", name, check=False)
        volumes |= {c["metadata"]["name"] for c in book.claims}
    for v in sorted(volumes):
        podman.podman("volume", "rm", "--force", v, check=False)
    for s in SECRETS:
        podman.podman("secret", "rm", PREFIX + s, check=False)
    podman.podman("network", "rm", "--force", NETWORK, check=False)
    shutil.rmtree(workdir, ignore_errors=True)
    left = podman.podman("volume", "ls", "--format", "{{.Name}}").stdout.split()
    return sorted(volumes & set(left))


def _control_plane_up(
    book: Playbook, cms: list[Path], workdir: Path, timeout_s: float
) -> dict[str, str]:
    """Play the claims and every non-edge pod; wait for all their probes."""
    claims = workdir / "claims.yaml"
    claims.write_text(yaml.safe_dump_all(book.claims, sort_keys=False))
    podman.podman("kube", "play", "--network", NETWORK, str(claims))
    control = [n for n, _, _ in book.pods if not _edge(book, n)]
    for name, doc, ip in book.pods:
        if name in control:
            play(name, doc, ip, cms, workdir)
    return wait_probes(book, control, timeout_s)


def local_images(stand_in: set[str] | None = None) -> dict[str, str]:
    """Manifest image -> local tag: ours as `make images` tags them, third-party stand-ins
    (those named in ``stand_in``, default all; each built if missing)."""
    ours = ("market", "pricing", "orchestration", "evaluation", "superlink", "edge")
    out = {f"registry.example.org/mots/{n}": f"localhost/mots/{n}:dev" for n in ours}
    return out | standins.images(stand_in)


def setup(
    workdir: Path, book: Playbook, overrides: dict[str, dict[str, str]]
) -> tuple[list[Path], str]:
    """Network, the README's Secrets, ConfigMap files, node disks; (ConfigMap paths, op token)."""
    podman.podman("network", "create", "--subnet", SUBNET, NETWORK)
    made = readme_secrets(workdir)
    for name, (secret, how) in made.items():
        create_secret(book.name(name), secret, how, workdir)
    ca = workdir / "tls/ca.crt"
    ca_map = kubectl_config_map(book.name("superlink-ca"), f"--from-file=ca.crt={ca}")
    book.config_maps.append(ca_map)
    cms = []
    for cm in book.config_maps:
        cm["data"].update(overrides.get(unhashed(book.k3s_name(cm["metadata"]["name"])), {}))
        cms.append(workdir / f"configmap-{cm['metadata']['name']}.yaml")
        cms[-1].write_text(yaml.safe_dump(cm, sort_keys=False))
    prepare_nodes(workdir / "nodes", book)
    token = yaml.safe_load(secret_for_volume(made["mots-secrets"][0]))["data"]["operator-token"]
    return cms, str(token)


def play_tier(workdir: Path, workloads: set[str], timeout_s: float = 300) -> dict[str, str]:
    """Play only ``workloads`` of the overlay (as shipped) and run their probes; then clean up."""
    resources = render(ROOT / "k8s/overlays/k3s-pi")
    names = {r["metadata"]["name"] for r in resources if r["kind"] in WORKLOADS}
    book: Playbook | None = None
    try:
        workdir.mkdir(parents=True, exist_ok=True)
        images = local_images(workloads & set(standins.STAND_INS.values()))
        book = playbook(resources, images, {}, str(workdir / "nodes"), SUBNET,
                        frozenset(names - workloads), frozenset(SECRETS))  # fmt: skip
        cms, _ = setup(workdir, book, {})
        return _control_plane_up(book, cms, workdir, timeout_s)
    finally:
        cleanup(book, workdir)


def run(
    workdir: Path,
    images: dict[str, str],
    config_overrides: dict[str, dict[str, str]] | None = None,
    timeout_s: float = 1200,
    skip: frozenset[str] = frozenset({"grafana", "prometheus", "alertmanager"}),
) -> dict[str, Any]:
    """Play the overlay and publish a round on it; the report's ``kube_play`` part."""
    started = time.monotonic()
    book: Playbook | None = None
    report: dict[str, Any] = {"not_expressible": NOT_EXPRESSIBLE}
    try:
        workdir.mkdir(parents=True, exist_ok=True)
        resources = render(ROOT / "k8s/overlays/k3s-pi")
        book = playbook(resources, images, EDGE_NODES, str(workdir / "nodes"), SUBNET, skip,
                        frozenset(SECRETS))  # fmt: skip
        cms, token = setup(workdir, book, config_overrides or {})
        probes = _control_plane_up(book, cms, workdir, timeout_s=300)
        report["control_plane_probes"] = probes
        ip = {n: i for n, _, i in book.pods}
        stack = market_round.Stack(
            market=f"http://{ip[book.name('market-pod-0')]}:8000",
            orchestration=f"http://{ip[book.name('orchestration-pod-0')]}:8000",
            operator_token=token,
        )
        market_round.wait_healthy(stack.market, 120)
        codes = market_round.enrol(stack)
        for task in TASKS[1:]:  # step 7: a code per type and task, key type-N.<task>
            market_round.create_task(stack, task)
            more = market_round.enrol(stack, task=task)
            codes |= {f"{t}.{task}": code for t, code in more.items()}
        literals = [f"--from-literal={t}={code}" for t, code in sorted(codes.items())]
        s = kubectl_secret(book.name("enrolment"), *literals)
        create_secret(book.name("enrolment"), s, "volume", workdir)
        edges = [n for n, _, _ in book.pods if _edge(book, n)]
        for name, doc, addr in book.pods:
            if name in edges:
                play(name, doc, addr, cms, workdir)
        report["edge_probes"] = wait_probes(book, edges, timeout_s=300)
        nodes = [n for ns in EDGE_NODES.values() for n in ns]
        market_round.wait_registered(stack, nodes, timeout_s=300)
        rounds = _rounds(stack, workdir, timeout_s)
        report.update(rounds[TASKS[0]])  # the default task's round at the top, as before
        report["tasks"] = rounds
        report["ledger_balanced"] = market_round.ledger(stack)["balanced"]  # after both rounds
    finally:
        report["seconds"] = round(time.monotonic() - started, 1)
        report["leftover_volumes"] = cleanup(book, workdir)
    return report


def _rounds(
    stack: market_round.Stack, workdir: Path, timeout_s: float
) -> dict[str, dict[str, Any]]:
    """A round of each task opened at once, each with a host-side buyer of its task (a spare
    type-1 code of that task) who buys while it collects; then each waited for, its model
    downloaded and verified, its participants' payouts read; task -> its round's facts."""
    started = {}
    for task in TASKS:
        spare = market_round.enrol(
            stack, {"type-1": market_round.TYPES["type-1"]}, uses=1, task=task
        )
        buyer = market_round.buyer(stack, spare["type-1"], name=f"buyer-{task}")
        collect = None if task == TASKS[0] else DIGITS_COLLECT_S
        round_id = market_round.open_round(stack, task, collect)
        bought = market_round.buy_and_verify(buyer, round_id, workdir / f"model-{task}.pt")
        started[task] = (buyer, round_id, bought, time.monotonic())
    out = {}
    for task, (buyer, round_id, bought, opened) in started.items():
        body = market_round.wait_round(stack, round_id, timeout_s)
        seconds = round(time.monotonic() - opened, 1)
        verified = body["state"] == "published" and market_round.download(
            buyer, round_id, workdir / f"model-{task}.pt"
        )
        buyer.close()
        summary = body.get("summary") or {}
        led = market_round.ledger(stack)
        out[task] = {
            "round_id": round_id,
            "round_state": body["state"],
            "seconds": seconds,
            "ledger_balanced": led["balanced"],
            "buyer_download_verified": verified,
            "purchase": bought["purchase"],
            "verification": summary.get("verification"),
            "participants": market_round.payouts(stack, round_id, summary),
            "k": sum((summary.get("participants") or {}).values()),
            "fedavg_seconds": body["fedavg_seconds"],
        }
    return out


def problems(report: dict[str, Any]) -> list[str]:
    """What the report's rounds fail of `make deploy-test`'s two-task check (empty: none): each
    task's round published with the buyer's download verified, its participants (K of them) all
    verified and each paid exactly its type's reward, once (its task's wallet holding just that),
    and the ledger balanced after both."""
    out = [] if report.get("ledger_balanced") else ["the ledger is not balanced"]
    rounds = report.get("tasks") or {}
    for task in TASKS:
        rnd = rounds.get(task)
        if rnd is None:
            out.append(f"{task}: no round")
            continue
        if rnd["round_state"] != "published" or not rnd["buyer_download_verified"]:
            out.append(
                f"{task}: {rnd['round_state']}, download verified {rnd['buyer_download_verified']}"
            )
        participants = rnd["participants"]
        if not rnd["k"] or len(participants) != rnd["k"]:
            out.append(f"{task}: K = {rnd['k']}, {len(participants)} participants reported")
        for name, p in participants.items():
            reward = Decimal(p["reward"] or 0)
            once = [reward] if reward else []
            if (
                p["verification"] != "verified"
                or [Decimal(a) for a in p["booked"]] != once
                or Decimal(p["wallet"] or 0) != reward
            ):
                out.append(
                    f"{task}: {name} {p['verification']}, booked {p['booked']}, reward {reward}"
                )
    return out
