"""The operator's view of the market on the command line (issue 26): the clients with their
status, every ledger transaction across accounts, and every account's balance. The commands join
the `mots market` group."""

from __future__ import annotations

import re
from datetime import datetime

import click

from mots.cli.client import Session, connection, money, table
from mots.cli.market import market
from mots.platform.api.market import AccountOut, ClientStatus

STATUSES = click.Choice([s.value for s in ClientStatus])


@market.command("clients")
@click.option("--status", "status", type=STATUSES, help="only clients in this status")
@connection
def clients(session: Session, status: str | None) -> None:
    """(operator) The registered clients and their status (pending clients are not priced).

    \b
    Example:
      mots market clients
      mots market clients --status pending --json
    """
    with session.market(operator=True) as m:
        out = m.clients(status=status)
    rows = [(c.id, c.name, c.status.value, c.type_name, c.data_size, money(c.cost)) for c in out]
    session.emit(out, table(rows, ("id", "name", "status", "type", "D", "C")))


@market.command("transactions")
@click.option("--account", help="only those touching this account (wallet:3, platform:subsidy)")
@click.option("--round", "round_id", type=click.IntRange(min=1), help="only this round's")
@click.option("--kind", help="deposit, purchase, refund, reward, charge, subsidy, surplus, …")
@click.option("--since", type=click.DateTime(), help="created at or after (UTC)")
@click.option("--until", type=click.DateTime(), help="created before (UTC)")
@click.option("--limit", type=click.IntRange(1, 500), default=50, show_default=True)
@click.option("--cursor", help="the `next` a previous page printed")
@connection
def transactions(
    session: Session,
    account: str | None,
    round_id: int | None,
    kind: str | None,
    since: datetime | None,
    until: datetime | None,
    limit: int,
    cursor: str | None,
) -> None:
    """(operator) Ledger transactions across every account, newest first, one page at a time.

    \b
    Example:
      mots market transactions --round 1
      mots market transactions --account platform:subsidy --json
    """

    def utc(t: datetime | None) -> str | None:
        return None if t is None else t.strftime("%Y-%m-%dT%H:%M:%SZ")

    with session.market(operator=True) as m:
        page = m.transactions(
            limit=limit,
            cursor=cursor,
            account=account,
            round_id=round_id,
            kind=kind,
            since=utc(since),
            until=utc(until),
        )
    rows = [
        (
            t.id,
            t.kind,
            t.round_id,
            t.created_at.strftime("%Y-%m-%d %H:%M:%S"),
            ", ".join(f"{e.account} {money(e.amount)}" for e in t.entries),
        )
        for t in page.items
    ]
    more = f"\nmore: --cursor {page.next}" if page.next else ""
    session.emit(page, table(rows, ("tx", "kind", "round", "at (UTC)", "entries")) + more)


@market.command("accounts")
@click.option(
    "--category",
    help="wallets, round_pools, platform_subsidy, platform_surplus, external_deposits",
)
@click.option(
    "--all", "show_all", is_flag=True, help="also the empty payment shards of each round's pool"
)
@connection
def accounts(session: Session, category: str | None, show_all: bool) -> None:
    """(operator) Every ledger account and its balance: wallets, round pools, the platform's
    subsidy and surplus, external deposits. A round's pool takes payments in 16 shard accounts
    (round:N:pool:K) that settlement empties; empty ones are left out unless --all.

    \b
    Example:
      mots market accounts --category platform_subsidy
      mots market accounts --all --json
    """
    with session.market(operator=True) as m:
        every = m.accounts(category=category)
    out = every if show_all else [a for a in every if not _empty_shard(a)]
    rows = [(a.name, a.category, money(a.balance)) for a in out]
    hidden = len(every) - len(out)
    note = f"\n({hidden} empty pool shard accounts left out; --all shows them)" if hidden else ""
    session.emit(out, table(rows, ("account", "category", "balance")) + note)


def _empty_shard(account: AccountOut) -> bool:
    """A round pool's payment shard (``round:N:pool:K``) with nothing in it: bookkeeping that
    settlement consolidates, not an account an operator reads (issue 40: 16 per round)."""
    return re.fullmatch(r"round:\d+:pool:\d+", account.name) is not None and not account.balance


commands: list[click.Command] = []
