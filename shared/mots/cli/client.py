"""`mots market …` and `mots rounds …`: the market's buyers, participants and operator on the
command line, over the client SDK (:mod:`mots.client`).

Every command takes the connection options (flags > environment > profile > the
``endpoints.json`` of `mots platform up`; see :mod:`mots.client.config`) and ``--json``. A refusal
prints the service's problem detail on one line and exits 1; a usage or configuration error
exits 2, no answer 3, a timeout 4 (:mod:`mots.cli.errors`; with ``--json``, one JSON line).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import click
from pydantic import BaseModel, ValidationError

from mots.cli.errors import report, transport_code
from mots.client.config import ClientConfig, ConfigError, resolve
from mots.client.errors import MarketError
from mots.client.located import LocatedMarketClient, LocatedRoundsClient
from mots.client.market import MarketClient
from mots.client.rounds import RoundsClient
from mots.platform.money import plain_rule

F = TypeVar("F", bound=Callable[..., Any])


class RoleError(click.ClickException):
    """An operator command under a client profile: refused before any request (exit 2)."""

    exit_code = 2


@dataclass(frozen=True)
class Session:
    """One command's resolved configuration and output mode."""

    config: ClientConfig
    as_json: bool

    def operator_token(self) -> str:
        """The operator's token; under a client profile a :class:`RoleError` in one line."""
        if self.config.role == "client":
            command = click.get_current_context(silent=True)
            name = command.command_path if command is not None else "this command"
            raise RoleError(
                f"`{name}` is an operator command and profile {self.config.profile!r} is a "
                "client's: run it as the operator (without --profile / MOTS_PROFILE)"
            )
        return self.config.require("operator_token")

    def market(self, *, operator: bool = False) -> MarketClient:
        """A market client with this client's token (or the operator's)."""
        url = self.config.require("market_url")
        return LocatedMarketClient(
            url,
            self.operator_token() if operator else self.config.require("token"),
            origin=self.config.origin("market_url"),
        )

    def registrar(self, *, vouch: bool) -> MarketClient:
        """A market client for registration: with the operator's token when it must ``vouch``
        for the type (an operator's act), else without a token (an enrolment code)."""
        token = self.operator_token() if vouch else None
        url = self.config.require("market_url")
        return LocatedMarketClient(url, token, origin=self.config.origin("market_url"))

    def rounds(self, *, operator: bool = False) -> RoundsClient:
        """An orchestration client: the operator's token, else this client's (a client
        profile's own token only)."""
        url = self.config.require("orchestration_url")
        origin = self.config.origin("orchestration_url")
        if operator:
            return LocatedRoundsClient(url, self.operator_token(), origin=origin)
        token = self.config.operator_token or self.config.token
        return LocatedRoundsClient(url, token, origin=origin)

    def emit(self, data: BaseModel | Sequence[BaseModel] | dict[str, Any], human: str) -> None:
        """Print ``data`` as JSON under ``--json``, else the ``human`` text."""
        if not self.as_json:
            click.echo(human)
        elif isinstance(data, BaseModel):
            click.echo(data.model_dump_json(indent=1, by_alias=True))
        elif isinstance(data, dict):
            click.echo(json.dumps(data, indent=1, default=str))
        else:
            click.echo(
                json.dumps([d.model_dump(mode="json", by_alias=True) for d in data], indent=1)
            )


def connection(command: F) -> F:
    """Add the connection options and ``--json``; pass a :class:`Session` as ``session``; turn
    the SDK's errors into one-line messages (exit 1) and configuration errors into usage errors."""
    options = [
        click.option("--market-url", help="the market API (env MOTS_MARKET_URL)"),
        click.option("--orchestration-url", help="the round API (env MOTS_ORCHESTRATION_URL)"),
        click.option("--token", help="this client's bearer token (env MOTS_TOKEN)"),
        click.option("--operator-token", help="the operator's token (env MOTS_OPERATOR_TOKEN)"),
        click.option(
            "--profile", help="a profile of ~/.config/mots/profiles.toml (env MOTS_PROFILE)"
        ),
        click.option(
            "--workdir",
            type=click.Path(path_type=Path, file_okay=False),
            help="the folder of `mots platform up`'s endpoints.json (env MOTS_WORKDIR; "
            "default out/platform)",
        ),
        click.option("--json", "as_json", is_flag=True, help="print the answer as JSON"),
    ]

    @functools.wraps(command)
    def run(**kw: Any) -> Any:
        flags = {
            k: kw.pop(k) for k in ("market_url", "orchestration_url", "token", "operator_token")
        }
        profile, workdir, as_json = kw.pop("profile"), kw.pop("workdir"), kw.pop("as_json")
        try:
            config = resolve(flags, profile=profile, workdir=workdir)
            return command(session=Session(config, as_json), **kw)
        except ConfigError as exc:
            fail(as_json, "configuration", str(exc), click.UsageError(str(exc)))
        except ValidationError as exc:  # the SDK's own schemas refused an argument
            fail(as_json, "usage", invalid(exc), click.UsageError(invalid(exc)))
        except RoleError as exc:
            fail(as_json, "role", exc.message, exc)
        except TimeoutError as exc:  # a wait (`rounds watch --timeout`) ran out
            report(as_json, "timeout", f"timeout: {exc}", kind="timeout")
        except MarketError as exc:
            refused(as_json, exc)

    wrapped: Any = run
    for option in reversed(options):
        wrapped = option(wrapped)
    return wrapped  # type: ignore[no-any-return]


def refused(as_json: bool, exc: MarketError) -> NoReturn:
    """A service's refusal (its problem code, exit 1), or no usable answer (``unreachable``,
    ``timeout``, ``bad-answer``; :mod:`mots.cli.errors`), as one line naming the call."""
    code = exc.code or (transport_code(exc) if exc.status is None else f"http-{exc.status}")
    status = {"unreachable": "unreachable", "timeout": "timeout"}.get(code, str(exc.status))
    if exc.status is None and code == "bad-answer":
        status = "unreadable answer"
    where = f" ({exc.method} {exc.path})" if exc.method else ""
    message = f"{status}: {exc.detail}{where}"
    if exc.request_id:
        message += f" [request {exc.request_id}]"
    report(
        as_json,
        code,
        message,
        kind="refused" if exc.status is not None else code,
        status=exc.status,
        method=exc.method,
        path=exc.path,
        request_id=exc.request_id,
    )


def fail(as_json: bool, code: str, message: str, exc: click.ClickException) -> NoReturn:
    """Raise ``exc`` (click prints it, exit 2); under ``--json`` report it as one JSON line with
    ``code`` instead (:func:`mots.cli.errors.report`, the same exit status)."""
    if not as_json:
        raise exc
    report(True, code, message, kind=code)


def table(rows: Iterable[Sequence[object]], header: Sequence[str]) -> str:
    """Plain aligned columns (fits 80 columns for the short values these commands show)."""
    cells = [[str(c) for c in header], *[[("-" if c is None else str(c)) for c in r] for r in rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells
    )


def money(value: Decimal | float | None) -> str:
    """An amount with six places, as the ledger books it."""
    return "-" if value is None else f"{Decimal(str(value)):.6f}"


def from_now(seconds: float) -> str:
    """A moment relative to now in words (issue 40): ``in 42 s`` or ``163 s ago``, never a
    negative count of seconds "from now"."""
    whole = round(seconds)
    return f"in {whole} s" if whole >= 0 else f"{-whole} s ago"


def decimal_amount(
    _ctx: click.Context, _param: click.Parameter, value: str | None
) -> Decimal | None:
    """A decimal amount as typed (no float rounding); bad text is a usage error."""
    if value is None:
        return None
    try:
        amount = Decimal(value)
    except InvalidOperation:
        raise click.BadParameter(f"{value!r} is not a decimal amount") from None
    if not amount.is_finite():
        raise click.BadParameter(f"{value!r} is not a finite amount")
    return amount


def invalid(exc: ValidationError) -> str:
    """A schema's refusal in one line: ``field: rule; field: rule``."""
    return "; ".join(
        f"{'.'.join(str(x) for x in e['loc']) or 'input'}: {plain_rule(e['msg'])}"
        for e in exc.errors()
    )
