"""`mots market …`: read the quote, declare, buy, balance and ledger, download and inspect a
model; the operator's deposits and ledger check. Enrolling and registering
(:mod:`mots.cli.enrolment`) and the operator's ledger views (:mod:`mots.cli.ledger`) join this
group from their own modules."""

from __future__ import annotations

import json
import time
from decimal import Decimal
from pathlib import Path

import click

from mots.cli.client import Session, connection, decimal_amount, money, table
from mots.cli.quote_text import on_sale_lines, when
from mots.client.config import ConfigError, save_profile
from mots.client.market import MarketClient, new_idempotency_key
from mots.client.model_file import ModelFileError, read_model_info
from mots.platform.api.base import Strategy
from mots.platform.api.market import DepositIn, QuoteOut


@click.group("market")
def market() -> None:
    """The market as a buyer, a participant or the operator (over its REST API).

    Settings come from flags, then MOTS_MARKET_URL, MOTS_ORCHESTRATION_URL, MOTS_TOKEN,
    MOTS_OPERATOR_TOKEN, then a profile (MOTS_PROFILE in ~/.config/mots/profiles.toml), then
    the endpoints.json of `mots platform up --workdir DIR` (MOTS_WORKDIR, default out/platform).

    Every client takes part in one task (`mots tasks ls`), its enrolment code's: it reads that
    task's quotes and buys and trains in that task's rounds; its wallet pays for any task.

    \b
    Example (a buyer):
      mots market enrol --type small --data-size 50 --cost 0.5    # the operator: a code
      mots market enrol --task digits --type type-1 --data-size 20 --cost 0.2
      mots market register --name alice --code CODE --save-as alice
      mots market deposit 1 10                                     # the operator funds client 1
      export MOTS_PROFILE=alice
      mots market quote --wait 60
      mots market buy 1
      mots market download 1               # mots-round-1.pt2, SHA-256 checked, and its .json
    """


@market.command("config")
@connection
def show_config(session: Session) -> None:
    """Show the settings the other commands use and where each comes from (tokens masked).

    \b
    Example:
      mots market config --workdir /tmp/mots
    """
    c = session.config
    values = {
        "market_url": c.market_url,
        "orchestration_url": c.orchestration_url,
        "token": None if c.token is None else c.token[:4] + "…",
        "operator_token": None if c.operator_token is None else c.operator_token[:4] + "…",
    }
    rows = [(k, v, c.sources.get(k, "-")) for k, v in values.items()]
    role = c.role or "not set (no profile)"
    rows.append(("role", role, f"profile {c.profile}" if c.profile else "-"))
    session.emit(
        {"settings": values, "sources": dict(c.sources), "role": c.role, "profile": c.profile},
        table(rows, ("setting", "value", "from")),
    )


def save_token(session: Session, profile: str, token: str, *, locate: bool = True) -> str:
    """Save ``token`` (and, with ``locate``, the market's and the rounds' URLs) as the client
    profile ``profile``: never a work folder or the operator's token (roles stay apart). A
    failure is reported, not raised: the token must still be shown."""
    c = session.config
    where = (
        {k: v for k in ("market_url", "orchestration_url") if (v := getattr(c, k))}
        if locate
        else {}
    )
    try:
        path = save_profile(profile, {**where, "role": "client", "token": token})
    except ConfigError as exc:
        return f"NOT saved as a profile ({exc}); keep the token"
    return f"saved as profile {profile} in {path}"


@market.command("me")
@connection
def me(session: Session) -> None:
    """The registered facts behind the token.

    \b
    Example:
      mots market me --json
    """
    with session.market() as m:
        out = m.me()
    session.emit(
        out,
        f"client {out.id} ({out.name}, type {out.type_name}, D {out.data_size}, C {money(out.cost)})",
    )


@market.command("leave")
@connection
def leave(session: Session) -> None:
    """Leave the market: out of every round that opens from now on (the wallet, the entries and
    the models stay readable with the same token).

    \b
    Example:
      mots market leave --profile pi-1
    """
    with session.market() as m:
        out = m.leave()
    session.emit(out, f"client {out.id} ({out.name}) has left the market")


@market.group("token")
def token() -> None:
    """This client's bearer token.

    \b
    Example:
      mots market token renew --profile alice
    """


@token.command("renew")
@connection
def renew(session: Session) -> None:
    """Replace the token by a new one with a fresh expiry (the old one is revoked at once); a
    token read from a profile is replaced in that profile.

    \b
    Example:
      mots market token renew --profile alice
    """
    with session.market() as m:
        out = m.renew_token()
    source = session.config.sources.get("token", "")
    saved = ""
    if source.startswith("profile "):
        saved = save_token(session, source.removeprefix("profile "), out.token, locate=False)
    expires = out.expires_at
    session.emit(
        out,
        f"client {out.client_id}: new token {out.token}, expires {expires:%Y-%m-%d %H:%M} UTC\n"
        + (saved or "(the old token is revoked; pass the new one as --token or MOTS_TOKEN)"),
    )


@market.command("quote")
@click.option("--round", "round_id", type=click.IntRange(1), help="a round (default: the latest)")
@click.option(
    "--wait",
    "wait_s",
    type=click.FloatRange(0),
    default=0,
    help="seconds to wait for the round to collect decisions (default: do not wait)",
)
@connection
def quote(session: Session, round_id: int | None, wait_s: float) -> None:
    """The round's price p, rewards r_i, targets and predicted ε (SWAN's quote), what is on sale
    now (the collecting round, and published rounds sold late at their round's price) and when
    the next round opens.

    \b
    Examples:
      mots market quote --wait 60
      mots market quote --round 1
    """
    with session.market() as m:
        q = m.quote(round_id)
        if wait_s > 0 and (q is None or q.state.value == "open"):
            rid = round_id or (q.round_id if q is not None else None)
            if rid is None:
                q = _wait_latest(m, wait_s)
            else:
                q = m.wait_for_quote(rid, timeout_s=wait_s, poll_s=0.5)
    if q is None:
        raise click.ClickException("404: no round has been quoted yet (`mots rounds open`)")
    deadline = getattr(q, "collect_deadline", None)
    rows = [(t.type_name, money(t.reward), t.target_participants, t.target_buyers) for t in q.types]
    human = (
        f"round {q.round_id} ({q.state.value}, {q.mechanism}): price {money(q.price)}, "
        f"ε {q.epsilon:.4f}, welfare {q.welfare:.4f}, incentive cost {money(q.incentive_cost)}"
        + (f"\n{when(deadline)}" if deadline else "")
        + "\n"
        + table(rows, ("type", "reward", "join (K*)", "buy (B*)"))
        + on_sale_lines(q)
    )
    session.emit(q, human)


def _wait_latest(m: MarketClient, wait_s: float) -> QuoteOut | None:
    """Poll the latest quote until one exists (then it is returned as it is)."""
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        q = m.quote()
        if q is not None:
            return q
        time.sleep(0.5)
    return None


@market.command("declare")
@click.argument("round_id", type=click.IntRange(1))
@click.argument("strategy", type=click.Choice([s.value for s in Strategy]))
@connection
def declare(session: Session, round_id: int, strategy: str) -> None:
    """Declare this client's strategy for a round: join (train), buy or abstain.

    A buyer may skip this: `mots market buy` declares buy and pays in one step (a declared
    buyer who has not paid when collection closes counts as abstaining).

    \b
    Example:
      mots market declare 1 join
    """
    with session.market() as m:
        out = m.declare(round_id, Strategy(strategy))
    session.emit(
        out, f"client {out.client_id} declared {out.strategy.value} in round {out.round_id}"
    )


@market.command("buy")
@click.argument("round_id", type=click.IntRange(1))
@click.option(
    "--idempotency-key", help="reuse a key to repeat a purchase safely (default: a new one)"
)
@connection
def buy(session: Session, round_id: int, idempotency_key: str | None) -> None:
    """Buy a round's model at its price (paid from the wallet; retried safely with one key).

    While the round collects this declares buy and pays its quote; once the round is published
    the model is still sold, at the same price p* (a late sale; `mots market quote` lists what
    is on sale).

    \b
    Examples:
      mots market buy 1
      mots market buy 1 --idempotency-key my-retry-key-1
    """
    key = announce_key(idempotency_key, f"mots market buy {round_id}")
    with session.market() as m:
        out = m.buy(round_id, idempotency_key=key)
    session.emit(
        out,
        f"purchase {out.purchase_id}: round {out.round_id} for {money(out.price)}"
        + (" (late sale: bought after the round published)" if out.late else "")
        + f", balance {money(out.balance)}",
    )


def announce_key(given: str | None, command: str) -> str:
    """The Idempotency-Key this call uses, printed on stderr before the call (issue 26), so a
    call that timed out can be retried without paying twice."""
    key = given or new_idempotency_key()
    click.echo(f"Idempotency-Key {key} (to retry: {command} --idempotency-key {key})", err=True)
    return key


@market.command("balance")
@click.option(
    "--limit", type=click.IntRange(1, 1000), default=20, show_default=True, help="ledger entries"
)
@connection
def balance(session: Session, limit: int) -> None:
    """The wallet's balance and its latest ledger entries.

    \b
    Example:
      mots market balance --limit 5
    """
    with session.market() as m:
        out = m.balance(limit)
    rows = [
        (
            e.transaction_id,
            e.kind,
            money(e.amount),
            e.round_id,
            e.created_at.strftime("%Y-%m-%d %H:%M:%S"),
        )
        for e in out.entries
    ]
    human = f"client {out.client_id}: balance {money(out.balance)}"
    if rows:
        human += "\n" + table(rows, ("tx", "kind", "amount", "round", "at (UTC)"))
    session.emit(out, human)


@market.command("ledger")
@click.option(
    "--limit", type=click.IntRange(1), default=50, show_default=True, help="newest entries shown"
)
@click.option("--all", "everything", is_flag=True, help="every entry (all pages)")
@connection
def ledger(session: Session, limit: int, everything: bool) -> None:
    """This client's ledger entries, newest first (deposits, purchases, rewards, refunds).

    \b
    Example:
      mots market ledger --all --json
    """
    with session.market() as m:
        out = m.entries(None if everything else limit)
    rows = [
        (
            e.transaction_id,
            e.kind,
            money(e.amount),
            e.round_id,
            e.created_at.strftime("%Y-%m-%d %H:%M:%S"),
        )
        for e in out
    ]
    session.emit(out, table(rows, ("tx", "kind", "amount", "round", "at (UTC)")))


@market.command("download")
@click.argument("round_id", type=click.IntRange(1))
@click.option(
    "--out",
    "dest",
    type=click.Path(path_type=Path, dir_okay=False),
    help="the file (default: mots-round-ROUND_ID.pt2 here); its metadata goes beside it as .json",
)
@connection
def download(session: Session, round_id: int, dest: Path | None) -> None:
    """Download a round's model (trained or bought), its SHA-256 checked, with its metadata.

    \b
    Example:
      mots market download 1 --out models/mots-round-1.pt2
    """
    path = dest or Path(f"mots-round-{round_id}.pt2")
    with session.market() as m:
        got = m.download_model(round_id, path)
    info = {"round_id": got.round_id, "path": str(got.path), "sha256": got.sha256, "size": got.size}
    if got.metadata_path is not None:
        info["metadata_path"] = str(got.metadata_path)
    session.emit(
        info,
        f"{got.path}: {got.size} bytes, SHA-256 {got.sha256} (verified)"
        + (f"\nmetadata {got.metadata_path}" if got.metadata_path else ""),
    )


@market.group("model")
def model() -> None:
    """A downloaded model file.

    \b
    Example:
      mots market model info mots-round-1.pt2
    """


@model.command("info")
@click.argument("path", type=click.Path(path_type=Path, dir_okay=False, exists=True))
@click.option("--json", "as_json", is_flag=True, help="print the metadata as JSON")
def model_info(path: Path, as_json: bool) -> None:
    """A model's metadata (round, coalition, ε, SHA-256) from its .json sidecar, without torch;
    the file's digest is checked against it.

    \b
    Example:
      mots market model info mots-round-1.pt2
    """
    try:
        info = read_model_info(path)
    except ModelFileError as exc:
        raise click.ClickException(str(exc)) from exc
    if as_json:
        click.echo(json.dumps(info, indent=1, sort_keys=True))
        return
    meta = info["metadata"] if isinstance(info.get("metadata"), dict) else {}
    shown = {
        "round": info.get("round_id"),
        "file": info.get("file"),
        "format": info.get("format"),
        "sha256": info.get("sha256"),
        "size": info.get("size"),
        "coalition K": info.get("participants"),
        "epsilon": info.get("epsilon"),
        "dataset": meta.get("dataset"),
        "model": meta.get("model"),
        "FedAvg round": (
            f"{meta['round']}/{meta['rounds']}" if "round" in meta and "rounds" in meta else None
        ),
    }
    for key, value in shown.items():
        if value is not None:
            click.echo(f"{key:<14} {value}")
    click.echo("sha256 check   ok (the file matches its metadata)")


@market.command("deposit")
@click.argument("client_id", type=click.IntRange(1))
@click.argument("amount", callback=decimal_amount)
@click.option(
    "--idempotency-key", help="reuse a key to repeat a deposit safely (default: a new one)"
)
@connection
def deposit(session: Session, client_id: int, amount: Decimal, idempotency_key: str | None) -> None:
    """(operator) Credit a client's wallet.

    \b
    Example:
      mots market deposit 1 10
    """
    DepositIn(client_id=client_id, amount=amount)  # a refused amount: no retry hint (issue 40)
    with session.market(operator=True) as m:
        typed = format(amount, "f")  # as the user types it, never 1E+30
        key = announce_key(idempotency_key, f"mots market deposit {client_id} {typed}")
        out = m.deposit(client_id, amount, idempotency_key=key)
    text = f"deposit {money(out.amount)} to client {out.client_id}: balance {money(out.balance)}"
    if out.replayed:  # issue 40: a repeated key books nothing; say so, and whose balance it is
        text = (
            f"replay of key {key}: deposit {money(out.amount)} to client {out.client_id} was"
            f" booked before (transaction {out.transaction_id}); nothing booked now; balance"
            f" {money(out.balance)} as of then"
        )
    session.emit(out, text)


@market.command("ledger-check")
@connection
def ledger_check(session: Session) -> None:
    """(operator) The ledger's invariants: every transaction balanced, the total zero.

    \b
    Example:
      mots market ledger-check
    """
    with session.market(operator=True) as m:
        out = m.ledger_check()
    ok = out.unbalanced_transactions == 0 and out.mismatched_accounts == 0 and out.total == 0
    session.emit(
        out,
        f"{'balanced' if ok else 'NOT BALANCED'}: {out.transactions} transactions, {out.entries} "
        f"entries, total {money(out.total)}, {out.unbalanced_transactions} unbalanced, "
        f"{out.mismatched_accounts} mismatched accounts",
    )
    if not ok:
        raise click.exceptions.Exit(1)


commands: list[click.Command] = [market]
