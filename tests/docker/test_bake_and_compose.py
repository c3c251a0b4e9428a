"""The buildx bake file builds every image for amd64 and arm64; compose.yaml is valid and whole.

compose.yaml is checked against the compose-spec JSON schema that check-jsonschema vendors
(``vendor.compose-spec``), offline.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.docker.images import (
    DOCKER,
    IMAGES,
    ROOT,
    SERVICES,
    dockerfile_of,
    load_bake,
    resolved_target,
    unquote,
)


@pytest.fixture(scope="module")
def bake() -> dict[str, dict[str, Any]]:
    """The bake file as {"variable": {...}, "group": {...}, "target": {...}}, names unquoted."""
    return load_bake()


def test_bake_has_one_target_per_image(bake: dict[str, dict[str, Any]]) -> None:
    """Each image is built by target <name>, tagged REGISTRY/name:VERSION, from the services'
    shared Dockerfile (docker/service) or, for the SuperLink and the edge node, their own."""
    targets = {n: t for n, t in bake["target"].items() if not n.startswith("_")}
    assert set(targets) == set(IMAGES)
    for name, t in targets.items():
        resolved = resolved_target(bake, name)
        assert resolved["dockerfile"] == str(dockerfile_of(name).relative_to(ROOT))
        assert (ROOT / resolved["dockerfile"]).is_file()
        assert [unquote(x) for x in t["tags"]] == [f"${{REGISTRY}}/{name}:${{VERSION}}"]
        parent = "_service" if name in SERVICES else "_common"
        assert [unquote(x) for x in t["inherits"]] == [parent]
    assert [unquote(x) for x in bake["target"]["_service"]["inherits"]] == ["_common"]
    groups = {n: [unquote(x) for x in g["targets"]] for n, g in bake["group"].items()}
    assert sorted(groups["default"]) == sorted(IMAGES)


def test_bake_builds_for_amd64_and_arm64_from_the_root(bake: dict) -> None:
    """The common target builds from the repository root for linux/amd64 and linux/arm64."""
    common = bake["target"]["_common"]
    assert unquote(common["context"]) == "."
    assert common["platforms"] == '${split(",", PLATFORMS)}'
    platforms = unquote(bake["variable"]["PLATFORMS"]["default"]).split(",")
    assert set(platforms) == {"linux/amd64", "linux/arm64"}


def _check_jsonschema() -> str:
    exe = shutil.which("check-jsonschema") or str(Path(sys.executable).parent / "check-jsonschema")
    assert Path(exe).exists(), "check-jsonschema is missing: install the dev extra"
    return exe


def _validate_compose(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [_check_jsonschema(), "--builtin-schema", "vendor.compose-spec", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_compose_file_matches_the_compose_spec_schema() -> None:
    """docker/compose.yaml validates against the compose-spec schema."""
    result = _validate_compose(DOCKER / "compose.yaml")
    assert result.returncode == 0, result.stdout + result.stderr


def test_compose_schema_check_can_fail(tmp_path: Path) -> None:
    """A misspelt service key fails the same check, so the check above is real."""
    bad = tmp_path / "compose.yaml"
    bad.write_text(
        (DOCKER / "compose.yaml")
        .read_text()
        .replace("    read_only: true\n", "    readonly: true\n", 1)
    )
    result = _validate_compose(bad)
    assert result.returncode != 0
    assert "readonly" in result.stdout + result.stderr


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load((DOCKER / "compose.yaml").read_text())


def test_compose_runs_the_whole_platform(compose: dict) -> None:
    """Redis, PostgreSQL, the services, a SuperLink, SuperNodes and agents, Prometheus, Grafana."""
    services = compose["services"]
    for name in (
        "redis", "postgres", "market", "market-worker", "pricing", "orchestration",
        "orchestration-worker", "evaluation-worker", "superlink", "prometheus", "grafana",
    ):  # fmt: skip
        assert name in services, name
    supernodes = {n: s["environment"] for n, s in services.items() if n.startswith("supernode-")}
    agents = {n: s["environment"] for n, s in services.items() if n.startswith("agent-")}
    assert len(supernodes) == len(agents) >= 3
    # each device: a distinct (type, index) = data partition, and an agent of the same type
    devices = {
        (e["MOTS_EDGE_CLIENT_TYPE"], e["MOTS_EDGE_CLIENT_INDEX"]) for e in supernodes.values()
    }
    assert len(devices) == len(supernodes)
    for name, e in supernodes.items():
        agent = agents[name.replace("supernode-", "agent-")]
        assert agent["MOTS_EDGE_CLIENT_TYPE"] == e["MOTS_EDGE_CLIENT_TYPE"]
        assert agent["MOTS_EDGE_CLIENT_NAME"] == e["MOTS_EDGE_CLIENT_NAME"]
    assert {e["MOTS_EDGE_CLIENT_TYPE"] for e in supernodes.values()} == {
        "type-1", "type-2", "type-3"
    }  # fmt: skip


def test_compose_builds_match_the_bake_targets(
    compose: dict, bake: dict[str, dict[str, Any]]
) -> None:
    """Each build is an image's bake target: the same Dockerfile, the same build args."""
    built = {}
    for name, svc in compose["services"].items():
        if "build" not in svc:
            continue
        build = svc["build"]
        assert build["context"] == ".."
        args = {k: str(v) for k, v in build.get("args", {}).items()}
        image = args.get("SERVICE") or Path(build["dockerfile"]).parent.name
        assert build["dockerfile"] == resolved_target(bake, image)["dockerfile"], name
        assert args == resolved_target(bake, image)["args"], name
        assert svc["image"] == f"${{MOTS_IMAGE_PREFIX:-mots}}/{image}:${{MOTS_VERSION:-dev}}"
        built[image] = name
    assert set(built) == set(IMAGES)


def test_compose_services_are_healthchecked_and_depend_on_real_services(compose: dict) -> None:
    """Every service has a health check (its own or its image's) and depends only on services."""
    services = compose["services"]
    image_health = {image for image in IMAGES if "HEALTHCHECK" in dockerfile_of(image).read_text()}
    for name, svc in services.items():
        ours = re.search(r"/([a-z]+):\$\{MOTS_VERSION", svc.get("image", ""))
        assert "healthcheck" in svc or (ours and ours.group(1) in image_health), name
        for dep, cond in svc.get("depends_on", {}).items():
            assert dep in services, f"{name} depends on unknown {dep}"
            assert cond["condition"] == "service_healthy"


def test_compose_mounted_files_exist(compose: dict) -> None:
    """Bind-mounted configuration (Prometheus, Grafana provisioning, PostgreSQL init) exists."""
    for name, svc in compose["services"].items():
        for volume in svc.get("volumes", []):
            source = volume.split(":")[0]
            if source.startswith((".", "/")) and not source.startswith("/usr/share"):
                assert (DOCKER / source).resolve().exists(), f"{name}: {source}"


def test_prometheus_scrapes_every_compose_api(compose: dict) -> None:
    """Prometheus scrapes exactly the compose APIs and workers, each on its MOTS_METRICS_PORT
    (an API's metrics are not on its API port, which its clients reach)."""
    config = yaml.safe_load((DOCKER / "prometheus/prometheus.yml").read_text())
    jobs = {j["job_name"]: j for j in config["scrape_configs"]}

    def targets(job: str) -> set[str]:
        return {t for sc in jobs[job]["static_configs"] for t in sc["targets"]}

    services = compose["services"]
    apis = {
        f"{n}:{s['environment']['MOTS_METRICS_PORT']}"
        for n, s in services.items()
        if "healthz" in str(s.get("healthcheck"))
    }
    assert all(not a.endswith((":0", ":8000")) for a in apis), apis
    workers = {
        f"{n}:{s['environment']['MOTS_METRICS_PORT']}"
        for n, s in services.items()
        if n.endswith("-worker")
    }
    assert targets("mots-services") == apis
    assert targets("mots-workers") == workers


def test_credentials_come_from_the_env_file(compose: dict) -> None:
    """Passwords and tokens are required ${VARS} from docker/.env, never literals in the file."""
    text = (DOCKER / "compose.yaml").read_text()
    for key in ("MOTS_OPERATOR_TOKEN", "POSTGRES_PASSWORD", "GF_SECURITY_ADMIN_PASSWORD"):
        for m in re.finditer(rf"{key}: (.*)", text):
            assert re.fullmatch(r"\$\{[A-Z_]+:\?[^}]+\}", m.group(1).strip()), m.group(0)
    example = (DOCKER / ".env.example").read_text()
    for var in set(re.findall(r"\$\{([A-Z0-9_]+):\?", text)):
        assert f"{var}=" in example, f"{var} is not in docker/.env.example"
    assert "docker/.env" in (ROOT / ".gitignore").read_text().split()


def test_writable_volumes_of_our_images_are_owned_by_the_image_user(compose: dict) -> None:
    """A named volume our non-root containers write to is a directory the image creates for uid
    10001 (Docker copies that ownership into a new volume; otherwise it would be root's)."""
    declared = set(compose["volumes"])
    for name, svc in compose["services"].items():
        ours = re.search(r"/([a-z]+):\$\{MOTS_VERSION", svc.get("image", ""))
        if not ours:
            continue
        dockerfile = dockerfile_of(ours.group(1)).read_text()
        created = set(re.findall(r"install -d -o mots -g mots ([^\n\\]+)", dockerfile))
        created_dirs = {d for line in created for d in line.split()}
        for volume in svc.get("volumes", []):
            source, target, *mode = volume.split(":")
            if source in declared and mode != ["ro"]:
                assert target in created_dirs, f"{name}: {target} is not created for uid 10001"


def test_the_apis_the_operator_cli_uses_are_published_on_loopback(compose: dict) -> None:
    """`mots market` needs the market API and `mots rounds open|watch` the orchestration's: both
    published on 127.0.0.1 (the compose round of tests/containers found the round API unreachable
    from the host, so no operator could open a round)."""
    published = {
        name: [p for p in svc.get("ports", []) if str(p).startswith("127.0.0.1:")]
        for name, svc in compose["services"].items()
    }
    assert published["market"] == ["127.0.0.1:8000:8000"]
    assert published["orchestration"] == ["127.0.0.1:8001:8000"]


def test_the_control_api_is_addressed_by_its_fixed_address(compose: dict) -> None:
    """The orchestration reaches the SuperLink's Control API on the internal control network by
    the address compose fixes (and the certificate names): podman with CNI gives an internal
    network no DNS, and the compose round on podman failed its training on `superlink:9093`."""
    worker = compose["services"]["orchestration-worker"]
    superlink = compose["services"]["superlink"]
    address = superlink["networks"]["control"]["ipv4_address"]
    assert worker["environment"]["MOTS_SUPERLINK_ADDRESS"] == f"{address}:9093"
    command = superlink["command"]
    assert command[command.index("--host") + 1] == address
    assert address in [command[i + 1] for i, a in enumerate(command) if a == "--tls-host"]
