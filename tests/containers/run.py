"""`make deploy-test` (python -m tests.containers.run): the parts of issue 23's container check in
order, each writing its key of out/deploy/report.json; then everything the run created is removed
and what is left is the report's `leftovers` (zero, or the run fails). A part is a function
returning its report entry (a dict with "incomplete" counts as failed: part of it was not
run; one with "failed": it ran and a check did not hold); add one by appending to PARTS (and its object names to PREFIXES).

  python -m tests.containers.run                  # every part
  python -m tests.containers.run --parts images registry airgap   # `make images`
"""

from __future__ import annotations

import argparse
import sys
import traceback
from collections.abc import Callable
from pathlib import Path

import yaml

from tests.containers import images, podman, report

Part = Callable[[], object]


def _images() -> object:
    """Every bake image for amd64 and the edge for arm64 (size, arch, build seconds)."""
    return images.build_all()


def _local_images() -> dict[str, dict[str, str]]:
    """What `make images` built: NAME -> {arch: local image}; every image for amd64, the edge for
    arm64 too (a missing one raises: make images first)."""
    from tests.docker.images import IMAGES

    local = {name: {"amd64": images.image_ref(name)} for name in IMAGES}
    local["edge"]["arm64"] = images.image_ref("edge", "arm64")
    missing = sorted(r for by in local.values() for r in by.values() if not podman.image_exists(r))
    if missing:
        raise RuntimeError(f"images not built: {missing} (make images)")
    return local


# What a Pi pulls, at most (issue 39: 903 MiB before docker/edge/slim.sh, times 20 Pis on Wi-Fi).
EDGE_LIMIT_MIB = 600


def _registry() -> object:
    """A real registry (TLS, htpasswd) started here: every image pushed with its digest, the
    overlay pinned by them, registries.yaml rendered, the arm64 edge pulled by digest over a
    20 Mbit/s link (tests/containers/registry.py)."""
    from tests.containers import registry

    local = _local_images()
    got = registry.part(report.REPORT.parent, local)
    arm64 = podman.image_facts(local["edge"]["arm64"])["size_mib"]
    got |= {"arm64_edge_mib": arm64, "arm64_edge_limit_mib": EDGE_LIMIT_MIB}
    if not (got["pulled_by_digest"] and got["overlay_pinned"]):
        got["failed"] = "the arm64 edge was not pulled by digest, or the overlay is not pinned"
    elif not isinstance(arm64, int | float) or arm64 > EDGE_LIMIT_MIB:
        got["failed"] = f"the arm64 edge image is {arm64} MiB, over {EDGE_LIMIT_MIB}"
    return got


def _airgap() -> object:
    """Per-architecture tarballs in k3s's images layout with SHA256SUMS, verified
    (tests/containers/airgap.py)."""
    from tests.containers import airgap, registry

    got = airgap.part(report.REPORT.parent / "airgap", _local_images(), registry.overlay_images())
    return got | ({} if got["verified"] else {"failed": "; ".join(got["problems"])[:1500]})


def _compose() -> object:
    """The compose stack on podman and a full market round through it."""
    from tests.containers import compose

    return compose.run_round()


def _kube_play() -> object:
    """The rendered k3s-pi overlay under podman kube play and a round of each task (fashion-mnist,
    digits) published on it, every participant paid its type's reward."""
    from tests.containers import kube_play

    wanted = kube_play.local_images()
    missing = sorted({v for v in wanted.values() if not podman.image_exists(v)})
    if missing:
        raise RuntimeError(f"images not built: {missing} (make images)")
    # the compose check's short round (tests/containers/compose.yaml) in the orchestration's
    # ConfigMap: the one override of the overlay's values
    small = yaml.safe_load(compose_override().read_text())["x-small-round"]
    got = kube_play.run(
        report.REPORT.parent / "kube-play", wanted, {"orchestration-config": dict(small)}
    )
    wrong = kube_play.problems(got)  # both tasks' rounds published, everyone paid as set
    return got | ({"failed": "; ".join(wrong)[:1500]} if wrong else {})


def compose_override() -> Path:
    """tests/containers/compose.yaml: the short round's settings."""
    return Path(__file__).with_name("compose.yaml")


def _arm64() -> object:
    """The arm64 edge image under QEMU: --help, imports and a warm node's local round, against the
    amd64 image's."""
    from tests.containers import arm64

    return arm64.part()


def _network() -> object:
    """Edge links shaped like a Pi on Wi-Fi, measured; then the three fault rounds on the compose
    stack with every edge link shaped (tests/containers/faults.py)."""
    from tests.containers import faults, network
    from tests.containers.base import ensure_base

    netem = network.measure(ensure_base("amd64"))
    got = faults.run_faults()
    return {"netem": netem, **got} | faults.verdict(got["faults"])


def _alerts() -> object:
    """Three alert conditions caused in the compose deployment, each seen at a webhook receiver
    firing and resolved (tests/containers/alerts.py): alerts[{name, fired, resolved}]."""
    from tests.containers import alerts

    return alerts.run()


def _https() -> object:
    """The shipped compose file alone (its training settings unmodified) behind its TLS front:
    the market over HTTPS with the deployment's CA from the host's address, plain HTTP refused,
    and a round on the shipped 5 x 20 at lr 0.5 (tests/containers/https.py): https{ok,
    plain_refused, shipped_round}."""
    from tests.containers import https

    return https.run()


def _restore() -> object:
    """The restore drill (tests/containers/restore.py): a round on the compose deployment, its
    scheduled backup, PostgreSQL's volume destroyed and restored: restore{ledger_balanced,
    rounds_readable}."""
    from tests.containers import restore

    return restore.run()


def _provision() -> object:
    """deploy/ansible/pi.yml on amd64 and arm64 stand-ins for fresh Pis, twice, then testinfra
    (tests/containers/provision.py): provision{first_changed, second_changed}."""
    from tests.containers import provision

    return provision.run()


PARTS: list[tuple[str, Part]] = [
    ("images", _images),
    ("registry", _registry),
    ("airgap", _airgap),
    ("compose", _compose),
    ("alerts", _alerts),
    ("https", _https),
    ("restore", _restore),
    ("kube_play", _kube_play),
    ("arm64", _arm64),
    ("network", _network),
    ("provision", _provision),
]
# Names of the containers, pods, volumes and networks the parts create: what cleanup removes and
# `leftovers` counts.
PREFIXES: list[str] = ["mots-ct", "mots-net", "mots-kp", "mots-pv"]


def main(argv: list[str] | None = None) -> int:
    """Run the chosen parts, clean up, write and print the report; 1 if anything failed."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--parts", nargs="*", help="part names (default: all)")
    args = parser.parse_args(argv)
    chosen = [(n, f) for n, f in PARTS if not args.parts or n in args.parts]
    failed = []
    try:
        for name, part in chosen:
            print(f"== {name}", flush=True)
            try:
                result = part()
                report.write_part(name, result)
                if isinstance(result, dict) and (result.get("incomplete") or result.get("failed")):
                    failed.append(name)  # measured what it could; the rest is not done or failed
                if isinstance(result, list) and not all(  # alerts[{name, fired, resolved}]
                    r.get("fired") and r.get("resolved") for r in result
                ):
                    failed.append(name)
            except Exception as exc:  # every part runs; its failure goes into the report
                traceback.print_exc()
                report.write_part(name, {"error": f"{type(exc).__name__}: {exc}"[:2000]})
                failed.append(name)
    finally:
        left = podman.remove(PREFIXES)
        counts = {kind: len(names) for kind, names in left.items()}
        whole = report.write_part("leftovers", counts | {"names": left})
    print(report.table(whole))
    if any(counts.values()):
        failed.append("leftovers")
    print("FAILED: " + ", ".join(failed) if failed else "all parts passed", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
