"""Where the client finds the platform: flags, then the environment, then a profile, then the
``endpoints.json`` that ``mots platform up`` writes.

Each setting is taken from the first source that has it (like ``flwr``'s federations, a profile
is a named table of a TOML file)::

    # ~/.config/mots/profiles.toml   (or $MOTS_PROFILES)
    default = "local"

    [profiles.alice]                         # a client: `mots market register --save-as`
    role = "client"
    market_url = "http://127.0.0.1:8101"
    orchestration_url = "http://127.0.0.1:8103"
    token = "…"                              # this client's own bearer token

    [profiles.lab]                           # the operator
    role = "operator"
    workdir = "~/mots"                       # read <workdir>/endpoints.json for the rest
    operator_token = "…"

Roles stay apart (issue 26): under a client profile (``role = "client"``, or a profile with a
``token`` and no ``operator_token``) the operator's token is never read, from no source (flag,
environment, profile or ``endpoints.json``), so the operator's commands are refused before any
request is made.

Environment: ``MOTS_MARKET_URL``, ``MOTS_ORCHESTRATION_URL``, ``MOTS_TOKEN`` (a client's token),
``MOTS_OPERATOR_TOKEN``, ``MOTS_PROFILE`` (the profile's name), ``MOTS_PROFILES`` (the file),
``MOTS_WORKDIR`` (the folder of ``endpoints.json``; default ``out/platform``).
"""

from __future__ import annotations

import json
import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ENDPOINTS_FILE = "endpoints.json"
"""Written by ``mots platform up`` into its work folder: ``{"market", "pricing",
"orchestration", "prometheus" (or null), "operator_token"}``."""
DEFAULT_WORKDIR = Path("out/platform")
SETTINGS = ("market_url", "orchestration_url", "token", "operator_token")
PROFILE_KEYS = frozenset({*SETTINGS, "workdir", "role"})
ROLES = ("client", "operator")
ENV = {
    "market_url": "MOTS_MARKET_URL",
    "orchestration_url": "MOTS_ORCHESTRATION_URL",
    "token": "MOTS_TOKEN",
    "operator_token": "MOTS_OPERATOR_TOKEN",
}
_FROM_ENDPOINTS = {
    "market_url": "market",
    "orchestration_url": "orchestration",
    "operator_token": "operator_token",
}


class ConfigError(ValueError):
    """The client's configuration is unreadable or incomplete (a usage error, not the market's)."""


@dataclass(frozen=True)
class ClientConfig:
    """The resolved settings and, for each, where it came from (for ``mots market config``)."""

    market_url: str | None
    orchestration_url: str | None
    token: str | None
    operator_token: str | None
    sources: Mapping[str, str]
    workdir: Path | None = None
    """The folder whose ``endpoints.json`` was read (None when none was found)."""
    role: str | None = None
    """``"client"`` under a client profile (never the operator's token), ``"operator"`` under an
    operator profile, None without a profile."""
    profile: str | None = None
    """The profile's name, when one was read."""

    def require(self, name: str) -> str:
        """The setting ``name``, or a :class:`ConfigError` naming the ways to give it."""
        value: str | None = getattr(self, name)
        if value:
            return value
        flag = "--" + name.replace("_", "-")
        where = (
            "`mots market register` prints one"
            if name == "token"
            else "or run `mots platform up --workdir DIR` and pass --workdir DIR"
        )
        raise ConfigError(
            f"{name}: not configured; pass {flag}, set {ENV[name]} or add it to a profile ({where})"
        )


def profiles_path(env: Mapping[str, str]) -> Path:
    """The profile file: ``$MOTS_PROFILES``, else ``$XDG_CONFIG_HOME/mots/profiles.toml``
    (``~/.config/mots/profiles.toml``)."""
    if env.get("MOTS_PROFILES"):
        return Path(env["MOTS_PROFILES"]).expanduser()
    base = env.get("XDG_CONFIG_HOME") or str(Path("~/.config").expanduser())
    return Path(base) / "mots" / "profiles.toml"


def _profile(env: Mapping[str, str], name: str | None) -> tuple[str | None, dict[str, Any]]:
    """(the profile's name, its table); a named profile that does not exist is an error."""
    path = profiles_path(env)
    if not path.is_file():
        if name:
            raise ConfigError(f"profile {name!r}: the profile file {path} does not exist")
        return None, {}
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: not a readable TOML file ({exc})") from exc
    profiles = data.get("profiles", {})
    chosen = name or data.get("default")
    if chosen is None:
        return None, {}
    table = profiles.get(chosen) if isinstance(profiles, dict) else None
    if not isinstance(table, dict):
        raise ConfigError(f"profile {chosen!r}: no [profiles.{chosen}] table in {path}")
    unknown = sorted(set(table) - PROFILE_KEYS)
    if unknown:
        raise ConfigError(f"profiles.{chosen}.{unknown[0]}: unknown setting in {path}")
    if "role" in table and table["role"] not in ROLES:
        raise ConfigError(f"profiles.{chosen}.role: must be one of {', '.join(ROLES)} in {path}")
    return str(chosen), table


def profile_role(table: Mapping[str, Any]) -> str | None:
    """A profile's role: its ``role``, else ``client`` when it holds a client's token and no
    operator token, else ``operator`` when it holds an operator token; None for an empty one."""
    if "role" in table:
        return str(table["role"])
    if table.get("token") and not table.get("operator_token"):
        return "client"
    return "operator" if table.get("operator_token") else None


def read_endpoints(workdir: Path) -> dict[str, Any]:
    """The ``endpoints.json`` of a running ``mots platform up`` (empty when there is none)."""
    path = workdir.expanduser() / ENDPOINTS_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: not a readable endpoints file ({exc})") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: not a JSON object")
    return data


def _url_problem(url: str) -> str | None:
    """Why ``url`` cannot be requested (a bad port, a broken IPv6 host, no host), or None."""
    import httpx

    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, ValueError, TypeError) as exc:
        return str(exc)
    return None if parsed.host else "it names no host"


def resolve(
    flags: Mapping[str, str | None],
    *,
    profile: str | None = None,
    workdir: Path | None = None,
    env: Mapping[str, str] | None = None,
) -> ClientConfig:
    """Each setting from ``flags``, else the environment, else the profile, else the work
    folder's ``endpoints.json`` (the folder: ``workdir``, ``MOTS_WORKDIR``, the profile's
    ``workdir``, ``out/platform``)."""
    env = os.environ if env is None else env
    name, table = _profile(env, profile or env.get("MOTS_PROFILE") or None)
    folder = (
        workdir
        or (Path(env["MOTS_WORKDIR"]) if env.get("MOTS_WORKDIR") else None)
        or (Path(str(table["workdir"])) if "workdir" in table else None)
        or DEFAULT_WORKDIR
    )
    endpoints = read_endpoints(folder)
    role = profile_role(table) if name else None
    values: dict[str, str | None] = {}
    sources: dict[str, str] = {}
    for key in SETTINGS:
        if key == "operator_token" and role == "client":  # never the operator's, from nowhere
            values[key] = None
            sources[key] = f"none: profile {name} is a client's"
            continue
        candidates = [
            ("flag", flags.get(key)),
            (f"env {ENV[key]}", env.get(ENV[key])),
            (f"profile {name}", table.get(key)),
            (
                str(folder.expanduser() / ENDPOINTS_FILE),
                endpoints.get(_FROM_ENDPOINTS.get(key, "")),
            ),
        ]
        for source, value in candidates:
            if value:
                values[key] = str(value)
                sources[key] = source
                break
        else:
            values[key] = None
    for key in ("market_url", "orchestration_url"):
        url = values.get(key)
        if url and not url.startswith(("http://", "https://")):
            raise ConfigError(
                f"{key}: must start with http:// or https:// (got {url!r} from {sources[key]})"
            )
        if url and (why := _url_problem(url)) is not None:
            raise ConfigError(f"{key}: not a usable URL: {why} (got {url!r} from {sources[key]})")
    found = folder.expanduser().resolve() if endpoints else None
    return ClientConfig(sources=sources, workdir=found, role=role, profile=name, **values)


PROFILE_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def check_profile_name(name: str) -> None:
    """Refuse a profile name that is not a plain TOML key."""
    if not PROFILE_NAME.match(name):
        raise ConfigError(f"profile {name!r}: letters, digits, '-' and '_' only (1 to 64)")


def save_profile(
    name: str, settings: Mapping[str, str], env: Mapping[str, str] | None = None
) -> Path:
    """Add or update the profile ``name`` with ``settings`` (``token``, ``workdir``, …) in the
    profile file (created private: it holds tokens); returns the file's path."""
    env = os.environ if env is None else env
    check_profile_name(name)
    unknown = sorted(set(settings) - PROFILE_KEYS)
    if unknown:
        raise ConfigError(f"profiles.{name}.{unknown[0]}: unknown setting")
    path = profiles_path(env)
    data: dict[str, Any] = {}
    if path.is_file():
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError(f"{path}: not a readable TOML file ({exc})") from exc
    extra = sorted(set(data) - {"default", "profiles"})
    if extra:
        raise ConfigError(f"{path}: holds {extra[0]!r}, which this writer would drop; edit it")
    profiles: dict[str, dict[str, Any]] = dict(data.get("profiles", {}))
    profiles[name] = {**profiles.get(name, {}), **settings}
    lines = [f"default = {json.dumps(str(data['default']))}", ""] if "default" in data else []
    for pname, table in profiles.items():
        lines.append(f"[profiles.{pname}]")
        lines.extend(f"{k} = {json.dumps(str(v))}" for k, v in table.items())
        lines.append("")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.touch(mode=0o600)
    tmp.write_text("\n".join(lines), encoding="utf-8")
    tmp.replace(path)
    return path
