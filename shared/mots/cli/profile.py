"""`mots profile ls/show/set/rm`: the client's saved connections (:mod:`mots.client.config`), read
and edited without opening the TOML file (issue 40: when the market moved, no command could fix
a saved profile). Tokens are never printed, only their first characters."""

from __future__ import annotations

import json
from typing import Any

import click

from mots.client.config import (
    PROFILE_KEYS,
    ConfigError,
    check_profile_name,
    profile_role,
    read_profiles,
    remove_profile,
    save_profile,
    set_default_profile,
)

SECRETS = ("token", "operator_token")


def _masked(table: dict[str, Any]) -> dict[str, str]:
    """The profile's settings with each token cut to its first 6 characters."""
    return {k: (f"{str(v)[:6]}… (hidden)" if k in SECRETS else str(v)) for k, v in table.items()}


def _usage(exc: ConfigError) -> click.UsageError:
    return click.UsageError(str(exc))


@click.group("profile")
def profile() -> None:
    """Saved connections: a market URL (the rounds' URL the market tells), a token, a role.

    The file: $MOTS_PROFILES, else ~/.config/mots/profiles.toml (mode 600).

    \b
    Example:
      mots profile ls
    """


@profile.command("ls")
@click.option("--json", "as_json", is_flag=True, help="print the profiles as JSON")
def ls(as_json: bool) -> None:
    """Every profile: its name, role and where it connects (* marks the default).

    \b
    Example:
      mots profile ls --json
    """
    try:
        path, default, profiles = read_profiles()
    except ConfigError as exc:
        raise _usage(exc) from exc
    rows = [
        {
            "name": name,
            "default": name == default,
            "role": profile_role(table),
            "market_url": table.get("market_url"),
            "workdir": table.get("workdir"),
        }
        for name, table in profiles.items()
    ]
    if as_json:
        click.echo(json.dumps(rows, indent=1))
        return
    if not rows:
        click.echo(f"no profiles in {path}")
        return
    for r in rows:
        mark = "*" if r["default"] else " "
        where = r["market_url"] or (f"workdir {r['workdir']}" if r["workdir"] else "-")
        click.echo(f"{mark} {r['name']:<16} {r['role'] or '-':<9} {where}")


@profile.command("show")
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="print the profile as JSON")
def show(name: str, as_json: bool) -> None:
    """One profile's settings (tokens hidden).

    \b
    Example:
      mots profile show alice
    """
    try:
        path, default, profiles = read_profiles()
    except ConfigError as exc:
        raise _usage(exc) from exc
    if name not in profiles:
        raise click.UsageError(f"profile {name!r}: no [profiles.{name}] table in {path}")
    shown = _masked(profiles[name])
    if as_json:
        click.echo(json.dumps({"name": name, "default": name == default, **shown}, indent=1))
        return
    click.echo(f"profile {name}{' (default)' if name == default else ''} in {path}")
    for key, value in shown.items():
        click.echo(f"  {key:<18} {value}")


@profile.command("set")
@click.argument("name")
@click.argument("settings", nargs=-1, metavar="KEY=VALUE...")
@click.option("--default", "make_default", is_flag=True, help="use it without --profile")
def set_(name: str, settings: tuple[str, ...], make_default: bool) -> None:
    """Add or change settings of profile NAME (market_url, orchestration_url, token,
    operator_token, workdir, role); a URL is checked as the client will use it.

    \b
    Example:
      mots profile set lab workdir=/tmp/mots role=operator
    """
    pairs: dict[str, str] = {}
    for item in settings:
        key, sep, value = item.partition("=")
        if not sep or key not in PROFILE_KEYS:
            known = ", ".join(sorted(PROFILE_KEYS))
            raise click.UsageError(f"{item!r}: expected KEY=VALUE with KEY one of {known}")
        pairs[key] = value
    if not pairs and not make_default:
        raise click.UsageError("nothing to set: give KEY=VALUE pairs or --default")
    try:
        check_profile_name(name)
        path = save_profile(name, pairs)
        if make_default:
            set_default_profile(name)
    except ConfigError as exc:
        raise _usage(exc) from exc
    changed = ", ".join(sorted(pairs)) or "nothing else"
    click.echo(f"profile {name}: set {changed}{' (now the default)' if make_default else ''}")
    click.echo(f"  in {path}")


@profile.command("rm")
@click.argument("name")
def rm(name: str) -> None:
    """Remove profile NAME (its token is forgotten here, not revoked at the market); a profile
    that is not there is no error (nothing to remove, exit 0, as a second `platform down`).

    \b
    Example:
      mots profile rm old-laptop
    """
    try:
        path, _, profiles = read_profiles()
        if name not in profiles:
            click.echo(f"no profile {name} in {path} (nothing to remove)")
            return
        remove_profile(name)
    except ConfigError as exc:
        raise _usage(exc) from exc
    click.echo(f"removed profile {name} from {path}")


commands = [profile]
