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

A profile needs only the market's URL: when no source gives ``orchestration_url``,
:meth:`ClientConfig.require` asks the market (``GET /v1/platform``). A base URL ending in ``/v1``
is refused with the one to give, and :func:`explain_no_route` says what answers at a URL that
has no route the client expected (issue 40).

Roles stay apart (issue 26): under a client profile (``role = "client"``, or a profile with a
``token`` and no ``operator_token``) the operator's token is never read, from no source (flag,
environment, profile or ``endpoints.json``), so the operator's commands are refused before any
request is made.

Environment: ``MOTS_MARKET_URL``, ``MOTS_ORCHESTRATION_URL``, ``MOTS_TOKEN`` (a client's token),
``MOTS_OPERATOR_TOKEN``, ``MOTS_PROFILE`` (the profile's name), ``MOTS_PROFILES`` (the file),
``MOTS_WORKDIR`` (the folder of ``endpoints.json``; default ``out/platform``).
"""

from __future__ import annotations

import contextlib
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
    sources: dict[str, str]
    workdir: Path | None = None
    """The folder whose ``endpoints.json`` was read (None when none was found)."""
    role: str | None = None
    """``"client"`` under a client profile (never the operator's token), ``"operator"`` under an
    operator profile, None without a profile."""
    profile: str | None = None
    """The profile's name, when one was read."""

    def require(self, name: str) -> str:
        """The setting ``name``, or a :class:`ConfigError` naming the ways to give it. The
        orchestration's URL, when no source gives it, is asked of the market (its
        ``GET /v1/platform``): a profile needs only the market's URL."""
        value: str | None = getattr(self, name)
        if value:
            return value
        if name == "orchestration_url" and self.market_url:
            found = discover_orchestration(self.market_url, self.origin("market_url"))
            self.sources[name] = f"the market's GET {self.market_url}/v1/platform"
            return found
        flag = "--" + name.replace("_", "-")
        where = (
            "`mots market register` prints one"
            if name == "token"
            else "or run `mots platform up --workdir DIR` and pass --workdir DIR"
        )
        raise ConfigError(
            f"{name}: not configured; pass {flag}, set {ENV[name]} or add it to a profile ({where})"
        )

    def origin(self, name: str) -> str:
        """Where setting ``name`` came from, for error messages: ``market_url from profile
        alice`` (a flag, an environment variable, a profile, a work folder's endpoints.json)."""
        source = self.sources.get(name)
        if source is None:
            return f"{name} not configured"
        if source.endswith(ENDPOINTS_FILE):
            return f"{name} from the work folder's {source}"
        return f"{name} from {'the ' + source if source == 'flag' else source}"


def discover_orchestration(market_url: str, origin: str) -> str:
    """The round API's URL as the market at ``market_url`` states it (``GET /v1/platform``);
    a :class:`ConfigError` naming the URL, where it came from and what answered otherwise."""
    import httpx

    url = f"{market_url.rstrip('/')}/v1/platform"
    why = "orchestration_url: not configured and"
    try:
        r = httpx.get(url, timeout=10)
    except httpx.HTTPError as exc:
        raise ConfigError(
            f"{why} the market at {market_url} ({origin}) did not answer GET /v1/platform "
            f"({type(exc).__name__}: {exc}); pass --orchestration-url or set "
            f"{ENV['orchestration_url']}"
        ) from exc
    body: Any = None
    with contextlib.suppress(ValueError):
        body = r.json()
    found = body.get("orchestration_url") if isinstance(body, dict) else None
    if r.is_success and isinstance(found, str) and found:
        return found
    if r.is_success and isinstance(body, dict) and body.get("service") == "market":
        answer = "the market does not know it (its MOTS_ORCHESTRATION_PUBLIC_URL is unset)"
    else:
        with httpx.Client(timeout=5) as http:
            answer = explain_no_route(http, market_url, "market", "/v1/platform", origin)
    raise ConfigError(f"{why} {answer}; pass --orchestration-url or set {ENV['orchestration_url']}")


def explain_no_route(
    http: Any, base_url: str, expected: str, path: str, origin: str | None = None
) -> str:
    """Why ``base_url`` answered "no such route" for ``path``, a route the ``expected`` service
    has: the URL ends in ``/v1`` (the client adds it), or ``GET /healthz`` there names another
    service, or none (not a MoTS service at all). ``http`` is an ``httpx.Client``."""
    import httpx

    where = f"{base_url} ({origin})" if origin else base_url
    trimmed = base_url.rstrip("/")
    if trimmed.endswith("/v1"):
        return (
            f"{where} ends in /v1, and the client adds /v1 to each path (here {path}): "
            f"give the base URL {trimmed[: -len('/v1')]}"
        )
    try:
        answer = http.get(f"{trimmed}/healthz")
        service = answer.json().get("service") if answer.is_success else None
    except (httpx.HTTPError, ValueError, AttributeError):
        service = None
    if isinstance(service, str) and service != expected:
        return f"{where} is the {service} service, not the {expected}: it has no {path}"
    if service == expected:
        return f"{where} is the {expected}, but it has no {path} (an older version?)"
    return f"{where} is not a MoTS {expected} (GET /healthz there names no service): no {path}"


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
        if url:
            check_url(key, url, sources[key])
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
    for key in ("market_url", "orchestration_url"):
        if key in settings:
            check_url(key, str(settings[key]), f"profile {name}")
    path, default, profiles = read_profiles(env)
    profiles[name] = {**profiles.get(name, {}), **settings}
    return _write_profiles(path, default, profiles)


def check_url(key: str, url: str, source: str) -> None:
    """Refuse a base URL a client cannot use: no http(s) scheme, unparsable, or ending in
    ``/v1`` (the client adds the API's prefix to each path)."""
    if not url.startswith(("http://", "https://")):
        raise ConfigError(f"{key}: must start with http:// or https:// (got {url!r} from {source})")
    if (why := _url_problem(url)) is not None:
        raise ConfigError(f"{key}: not a usable URL: {why} (got {url!r} from {source})")
    if url.rstrip("/").endswith("/v1"):
        raise ConfigError(
            f"{key}: give the base URL {url.rstrip('/')[: -len('/v1')]}, without /v1: the "
            f"client adds /v1 to each path (got {url!r} from {source})"
        )


def read_profiles(
    env: Mapping[str, str] | None = None,
) -> tuple[Path, str | None, dict[str, dict[str, Any]]]:
    """(the profile file, the default profile's name, every profile's table); an absent file
    has none. A file holding more than ``default`` and ``[profiles.*]`` is refused (a writer
    would drop it)."""
    env = os.environ if env is None else env
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
    default = str(data["default"]) if "default" in data else None
    return path, default, dict(data.get("profiles", {}))


def remove_profile(name: str, env: Mapping[str, str] | None = None) -> Path:
    """Remove profile ``name`` (and the default, when it named it); a missing one is an error."""
    path, default, profiles = read_profiles(env)
    if name not in profiles:
        raise ConfigError(f"profile {name!r}: no [profiles.{name}] table in {path}")
    del profiles[name]
    return _write_profiles(path, None if default == name else default, profiles)


def set_default_profile(name: str, env: Mapping[str, str] | None = None) -> Path:
    """Make ``name`` (an existing profile) the one used without --profile / MOTS_PROFILE."""
    path, _, profiles = read_profiles(env)
    if name not in profiles:
        raise ConfigError(f"profile {name!r}: no [profiles.{name}] table in {path}")
    return _write_profiles(path, name, profiles)


def _write_profiles(
    path: Path, default: str | None, profiles: Mapping[str, Mapping[str, Any]]
) -> Path:
    """Write the profile file atomically, private (mode 600: it holds tokens)."""
    lines = [f"default = {json.dumps(default)}", ""] if default is not None else []
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
