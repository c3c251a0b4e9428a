"""Every environment variable the code reads is set in compose and in k8s, and nothing else is.

The variables are discovered at test time: the fields of every pydantic-settings class in
services/, edge/ and shared/mots (with their prefix or alias), and every literal name read through
``os.environ``/``os.getenv``. A container's readers follow from its image: ``<prefix>/market`` runs
services.market (its ``core/config.py`` Settings), ``edge`` runs the edge agent, and so on.
A field whose default is None means "unset" on purpose and may be left out; any other field must
be set explicitly, so a deployment never depends on a development default.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml
from pydantic import AliasChoices
from pydantic_settings import BaseSettings

from edge.agent.device_file import read_device_file
from tests.deploy.kustomize import containers, render
from tests.source_ast import parse

ROOT = Path(__file__).resolve().parents[2]
CODE_DIRS = ("services", "edge", "shared/mots")
OUR_IMAGES = ("market", "pricing", "orchestration", "evaluation", "superlink", "edge")
# PG*: libpq's connection variables (pg_dump, psql) and the server's PGDATA.
THIRD_PARTY_PREFIXES = ("POSTGRES_", "PG", "GF_", "NGINX_")
# Variables our images' libraries read, not our code: Flower's (FLWR_HOME, where it installs FABs).
LIBRARY_PREFIXES = ("FLWR_",)
"""Variables that third-party images (postgres, grafana, nginx: the TLS front) read; they never carry MOTS_ settings."""


def _script_reads() -> set[str]:
    """The BACKUP_* variables our backup and restore scripts (docker/postgres/*.sh, run in the
    postgres image by its backup service and CronJob) read as ``${NAME...}``."""
    scripts = (ROOT / "docker/postgres").glob("*.sh")
    return {m for p in scripts for m in re.findall(r"\$\{(BACKUP_[A-Z_]+)", p.read_text())}


SCRIPT_READS = _script_reads()


@dataclass
class Reads:
    """What one image's code reads: required variables and ones that may stay unset."""

    required: set[str] = field(default_factory=set)
    optional: set[str] = field(default_factory=set)

    @property
    def all(self) -> set[str]:
        return self.required | self.optional


def _env_names(cls: type[BaseSettings]) -> list[tuple[str, bool]]:
    """(variable, optional) per field of a settings class, as pydantic-settings reads them."""
    prefix = str(cls.model_config.get("env_prefix", ""))
    out = []
    for name, info in cls.model_fields.items():
        alias = info.validation_alias
        if isinstance(alias, str):
            names = [alias]
        elif isinstance(alias, AliasChoices):
            names = [c for c in alias.choices if isinstance(c, str)]
        else:
            names = [prefix + name]
        optional = info.default is None and not info.is_required()
        out.extend((n.upper(), optional) for n in names)
    return out


def _settings_classes() -> dict[str, list[type[BaseSettings]]]:
    """Every BaseSettings subclass defined in the code, by source file (relative to the root)."""
    found: dict[str, list[type[BaseSettings]]] = {}
    for base in CODE_DIRS:
        for path in sorted((ROOT / base).rglob("*.py")):
            tree = parse(path.read_text())
            names = [
                n.name
                for n in ast.walk(tree)
                if isinstance(n, ast.ClassDef)
                and any(
                    (isinstance(b, ast.Name) and b.id.endswith("Settings"))
                    or (isinstance(b, ast.Attribute) and b.attr.endswith("Settings"))
                    for b in n.bases
                )
            ]
            if not names:
                continue
            rel = path.relative_to(ROOT)
            parts = rel.with_suffix("").parts
            parts = parts[:-1] if parts[-1] == "__init__" else parts
            module = ".".join(parts[1:] if parts[0] == "shared" else parts)
            mod = importlib.import_module(module)
            classes = [getattr(mod, n) for n in names]
            classes = [c for c in classes if inspect.isclass(c) and issubclass(c, BaseSettings)]
            if classes:
                found[str(rel)] = classes
    return found


def _environ_reads() -> dict[str, set[str]]:
    """Literal variable names read via os.environ[...], os.environ.get(...), os.getenv(...)."""
    reads: dict[str, set[str]] = {}
    for base in CODE_DIRS:
        for path in sorted((ROOT / base).rglob("*.py")):
            names: set[str] = set()
            for node in ast.walk(parse(path.read_text())):
                arg = None
                if isinstance(node, ast.Subscript) and _is_environ(node.value):
                    arg = node.slice
                elif isinstance(node, ast.Call) and node.args:
                    f = node.func
                    if isinstance(f, ast.Attribute) and (
                        (f.attr in ("get", "pop", "setdefault") and _is_environ(f.value))
                        or (f.attr == "getenv" and isinstance(f.value, ast.Name))
                    ):
                        arg = node.args[0]
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                    names.add(arg.value)
            if names:
                reads[str(path.relative_to(ROOT))] = names
    return reads


def _is_environ(node: ast.expr) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == "environ") or (
        isinstance(node, ast.Name) and node.id == "environ"
    )


CLIENT_ONLY = ("shared/mots/platform/settings/client.py",)
"""What only the CLI/SDK reads (a person's shell, not a container's environment)."""


def _image_of_source(rel: str) -> set[str]:
    """Which images run the code in a source file (shared code: every image of ours)."""
    parts = Path(rel).parts
    if rel in CLIENT_ONLY:
        return set()
    if parts[0] == "services":
        return {parts[1]}
    if parts[:2] == ("edge", "agent"):
        return {"edge"}
    if parts[0] == "edge":  # the Flower app: ClientApp on the edge, ServerApp in the SuperLink
        return {"edge", "superlink"}
    return set(OUR_IMAGES)


@pytest.fixture(scope="module")
def reads_by_image() -> dict[str, Reads]:
    """Variables each of our images reads, from the settings classes and environ reads."""
    out = {image: Reads() for image in OUR_IMAGES}
    classes = _settings_classes()
    # Only leaf settings count: a class others extend (PlatformSettings) is read through them.
    all_classes = [c for cs in classes.values() for c in cs]
    for rel, cs in classes.items():
        for cls in cs:
            if any(other is not cls and issubclass(other, cls) for other in all_classes):
                continue
            for image in _image_of_source(rel):
                for name, optional in _env_names(cls):
                    (out[image].optional if optional else out[image].required).add(name)
    for rel, names in _environ_reads().items():
        for image in _image_of_source(rel):
            out[image].optional |= names  # read with a fallback or not, they may be set here
    return out


def test_discovery_finds_the_known_settings(reads_by_image: dict[str, Reads]) -> None:
    """The discovery sees the services' and the agent's settings (guards the test itself)."""
    assert "MOTS_DATABASE_URL" in reads_by_image["market"].required
    assert "MOTS_REDIS_URL" in reads_by_image["pricing"].required
    assert "MOTS_EDGE_CLIENT_TYPE" in reads_by_image["edge"].required
    assert "MOTS_UTILITY" in reads_by_image["edge"].required
    assert "MOTS_EDGE_CLIENT_NAME" in reads_by_image["edge"].optional
    for service in ("market", "pricing", "orchestration", "evaluation"):
        assert (ROOT / "services" / service / "core" / "config.py").is_file()


def _image_name(image: str) -> str | None:
    """Our image's short name (``market``) from any registry/tag spelling, else None."""
    m = re.search(r"(?:^|/)(?:mots/)?([a-z]+):[^/]+$", image)
    if not m or "mots" not in image:
        return None
    return m.group(1) if m.group(1) in OUR_IMAGES else None


def _compose_containers() -> list[tuple[str, str, set[str]]]:
    """(service, image, variables set) for every compose service."""
    compose = yaml.safe_load((ROOT / "docker/compose.yaml").read_text())
    out = []
    for name, svc in compose["services"].items():
        env = svc.get("environment", {})
        keys = set(env) if isinstance(env, dict) else {e.split("=", 1)[0] for e in env}
        image = svc.get("image", "")
        image = re.sub(r"\$\{MOTS_IMAGE_PREFIX:-([^}]*)\}", r"\1", image)
        image = re.sub(r"\$\{MOTS_VERSION:-([^}]*)\}", r"\1", image)
        out.append((name, image, keys))
    return out


def _k8s_containers(build: str) -> list[tuple[str, str, set[str]]]:
    """(workload/container, image, variables set) for every container of a rendered build."""
    resources = render(ROOT / build)
    config_maps = {
        r["metadata"]["name"]: set(r.get("data", {})) for r in resources if r["kind"] == "ConfigMap"
    }
    out = []
    for r in resources:
        for c in containers(r):
            keys = {e["name"] for e in c.get("env", [])}
            for source in c.get("envFrom", []):
                ref = source.get("configMapRef")
                assert ref, "envFrom is used for ConfigMaps only (secret keys are named one by one)"
                assert ref["name"] in config_maps, f"{ref['name']} is not rendered"
                keys |= {source.get("prefix", "") + k for k in config_maps[ref["name"]]}
            where = f"{r['metadata']['name']}/{c['name']}"
            if "--device-file" not in c.get("args", []):
                out.append((where, c["image"], keys))
                continue
            # The Pi's device file (edge.agent.device_file) adds its variables: checked with
            # each one the overlay ships (devices/<type>.env, installed on the Pi as it is).
            shipped = sorted((ROOT / build / "devices").glob("*.env"))
            assert shipped, f"{build}: {where} reads a device file but no devices/*.env ships"
            for path in shipped:
                extra = set(read_device_file(path))
                out.append((f"{where} with devices/{path.name}", c["image"], keys | extra))
    return out


def _check(
    where: str, rows: list[tuple[str, str, set[str]]], reads_by_image: dict[str, Reads]
) -> None:
    problems = []
    seen_images = set()
    for name, image, keys in rows:
        ours = _image_name(image)
        if ours is None:
            stray = sorted(k for k in keys if k.startswith("MOTS_"))
            if stray:
                problems.append(f"{where} {name}: third-party image sets {stray}")
            unknown = sorted(
                k for k in keys if not k.startswith(THIRD_PARTY_PREFIXES) and k not in SCRIPT_READS
            )
            if unknown:
                problems.append(f"{where} {name}: sets {unknown}, not read by its image")
            continue
        seen_images.add(ours)
        reads = reads_by_image[ours]
        missing = sorted(reads.required - keys)
        unread = sorted(k for k in keys - reads.all if not k.startswith(LIBRARY_PREFIXES))
        if missing:
            problems.append(f"{where} {name}: read by the code but not set: {missing}")
        if unread:
            problems.append(f"{where} {name}: set but read by no code of {ours}: {unread}")
    assert not problems, "\n".join(problems)
    assert seen_images, f"{where}: no container of ours found"


def test_compose_sets_exactly_what_the_code_reads(reads_by_image: dict[str, Reads]) -> None:
    """Each compose container sets every variable its code requires and none it does not read."""
    rows = _compose_containers()
    _check("compose", rows, reads_by_image)
    images = {_image_name(image) for _, image, _ in rows}
    assert {"market", "pricing", "orchestration", "evaluation", "superlink", "edge"} <= images


@pytest.mark.parametrize("build", ["k8s/base", "k8s/overlays/k3s-pi"])
def test_k8s_sets_exactly_what_the_code_reads(build: str, reads_by_image: dict[str, Reads]) -> None:
    """Each rendered container (env, ConfigMaps, secret keys) matches its code's reads both ways."""
    _check(build, _k8s_containers(build), reads_by_image)


def test_check_catches_a_missing_and_an_unread_variable(reads_by_image: dict[str, Reads]) -> None:
    """The comparison fails on a dropped required variable and on a variable nobody reads."""
    name, image, keys = next(r for r in _compose_containers() if r[0] == "market")
    with pytest.raises(AssertionError, match="MOTS_DATABASE_URL"):
        _check("compose", [(name, image, keys - {"MOTS_DATABASE_URL"})], reads_by_image)
    with pytest.raises(AssertionError, match="MOTS_NOBODY_READS_THIS"):
        _check("compose", [(name, image, keys | {"MOTS_NOBODY_READS_THIS"})], reads_by_image)
    name, image, keys = next(r for r in _compose_containers() if r[0] == "postgres-backup")
    assert {"BACKUP_KEEP", "BACKUP_INTERVAL_S"} <= keys & SCRIPT_READS
    with pytest.raises(AssertionError, match="BACKUP_NOBODY_READS_THIS"):
        _check("compose", [(name, image, keys | {"BACKUP_NOBODY_READS_THIS"})], reads_by_image)


def test_agents_value_the_model_as_the_market_does() -> None:
    """MOTS_UTILITY is the same for the edge agents and orchestration, in compose and in k8s."""
    compose = yaml.safe_load((ROOT / "docker/compose.yaml").read_text())["services"]
    values = {
        svc["environment"]["MOTS_UTILITY"]
        for svc in compose.values()
        if isinstance(svc.get("environment"), dict) and "MOTS_UTILITY" in svc["environment"]
    }
    assert len(values) == 1
    resources = render(ROOT / "k8s/overlays/k3s-pi")
    k8s_values = {
        r["data"]["MOTS_UTILITY"]
        for r in resources
        if r["kind"] == "ConfigMap" and "MOTS_UTILITY" in r.get("data", {})
    }
    assert len(k8s_values) == 1
