"""What each image is built from: its bake target (inherits resolved), Dockerfile and build args.

The four services share ``docker/service/Dockerfile``; :func:`final_args` evaluates its runtime
stage's ``ARG`` defaults under a target's args as BuildKit does (``${NAME}`` of an earlier ARG),
so a test can read the command and health check each service's image ends up with.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import hcl2

ROOT = Path(__file__).resolve().parents[2]
DOCKER = ROOT / "docker"
SERVICES = ("market", "pricing", "orchestration", "evaluation")
IMAGES = (*SERVICES, "superlink", "edge")
SERVICE_DOCKERFILE = DOCKER / "service" / "Dockerfile"


def unquote(value: str) -> str:
    """An HCL string as python-hcl2 gives it, without its quotes."""
    return value[1:-1] if value.startswith('"') and value.endswith('"') else value


def load_bake() -> dict[str, dict[str, Any]]:
    """The bake file as {"variable": {...}, "group": {...}, "target": {...}}, names unquoted."""
    with (DOCKER / "docker-bake.hcl").open() as f:
        raw = hcl2.load(f)
    out: dict[str, dict[str, Any]] = {}
    for block in ("variable", "group", "target"):
        out[block] = {}
        for entry in raw.get(block, []):
            for name, body in entry.items():
                out[block][unquote(name)] = body
    return out


def resolved_target(bake: dict[str, dict[str, Any]], name: str) -> dict[str, Any]:
    """A target's attributes with those it inherits (its own win), strings unquoted."""
    body = bake["target"][name]
    merged: dict[str, Any] = {}
    for parent in body.get("inherits", []):
        merged.update(resolved_target(bake, unquote(parent)))
    for key, value in body.items():
        if key == "args":
            merged["args"] = {**merged.get("args", {}), **value}
        elif key != "__is_block__":
            merged[key] = value
    if "dockerfile" in merged:
        merged["dockerfile"] = unquote(merged["dockerfile"])
    merged["args"] = {k: unquote(v) for k, v in merged.get("args", {}).items()}
    return merged


def dockerfile_of(image: str) -> Path:
    """The Dockerfile an image of ours is built from."""
    return SERVICE_DOCKERFILE if image in SERVICES else DOCKER / image / "Dockerfile"


def instructions(path: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    lines: list[str] = []
    buf = ""
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if line.startswith("#") or (not buf and not line):
            continue
        buf += " " + line[:-1] if line.endswith("\\") else " " + line
        if not line.endswith("\\"):
            lines.append(buf.strip())
            buf = ""
    out = []
    for line in lines:
        word, _, rest = line.partition(" ")
        out.append((word.upper(), rest.strip()))
    return out


def final_stage(path: Path) -> list[tuple[str, str]]:
    """The instructions of a Dockerfile's last stage (the image), from its FROM on."""
    ins = instructions(path)
    last = max(i for i, (w, _) in enumerate(ins) if w == "FROM")
    return ins[last:]


def declared_args(path: Path) -> set[str]:
    """Every ARG name a Dockerfile declares, in any stage."""
    return {a.split("=", 1)[0] for w, a in instructions(path) if w == "ARG"}


def final_args(path: Path, args: dict[str, str]) -> dict[str, str]:
    """The runtime stage's ARG values: ``args`` where given, else the defaults, ``${X}`` expanded."""
    values: dict[str, str] = {}
    for word, rest in final_stage(path):
        if word != "ARG":
            continue
        name, _, default = rest.partition("=")
        if name in args:
            values[name] = args[name]
            continue
        default = unquote(default)
        values[name] = re.sub(r"\$\{(\w+)\}", lambda m: values.get(m.group(1), ""), default)
    return values
