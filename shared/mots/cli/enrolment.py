"""`mots market enrol`, `register`, `enrolments`, `approve`, `revoke`: how devices come into the
market. The operator attests a type of a task and issues a code, a device redeems it and becomes a
client of that task (issue 36: a participant acts in its own task only), and the operator admits
or removes clients. The commands join the `mots market` group (split from :mod:`mots.cli.market`,
which reached the 600-line cap)."""

from __future__ import annotations

from decimal import Decimal

import click

from mots.cli.client import Session, connection, decimal_amount, money, table
from mots.cli.market import market, save_token
from mots.client.config import check_profile_name
from mots.platform.api.market import ClientRegistration, EnrolmentIn
from mots.platform.api.tasks import DEFAULT_TASK


@market.command("enrol")
@click.option("--type", "type_name", required=True, help="the attested type label i")
@click.option("--data-size", type=int, required=True, help="D_i the operator attests")
@click.option("--cost", callback=decimal_amount, required=True, help="C_i the operator attests")
@click.option("--uses", type=click.IntRange(1), default=1, show_default=True, help="registrations")
@click.option(
    "--ttl", "ttl_s", type=click.IntRange(60), default=7 * 86_400, show_default=True, help="seconds"
)
@click.option(
    "--task",
    default=DEFAULT_TASK,
    show_default=True,
    help="the task the devices join (stored: `mots tasks ls`); each task has its own types",
)
@connection
def enrol(
    session: Session,
    type_name: str,
    data_size: int,
    cost: Decimal,
    uses: int,
    ttl_s: int,
    task: str,
) -> None:
    """(operator) Issue an enrolment code for an attested type of a task; devices redeem it with
    `mots market register --code CODE` and join that task (the code is shown once).

    \b
    Examples:
      mots market enrol --type small --data-size 50 --cost 0.5 --uses 10
      mots market enrol --task digits --type type-1 --data-size 20 --cost 0.2
    """
    body = EnrolmentIn(
        type_name=type_name, data_size=data_size, cost=cost, uses=uses, ttl_s=ttl_s, task=task
    )
    with session.market(operator=True) as m:
        out = m.enrol(body)
    expires = out.expires_at
    uses_left = f"{out.uses_left} {'use' if out.uses_left == 1 else 'uses'}"
    session.emit(
        out,
        f"enrolment {out.id}: task {out.task}, type {out.type_name} (D {out.data_size}, "
        f"C {money(out.cost)}), {uses_left}, expires {expires:%Y-%m-%d %H:%M} UTC\n"
        f"code {out.code}",
    )


@market.command("register")
@click.option("--name", required=True, help="a display name")
@click.option("--code", "enrolment_code", help="an enrolment code from the operator")
@click.option("--type", "type_name", help="the type label i (the code's if omitted)")
@click.option("--data-size", type=int, help="D_i, training samples held (the code's if omitted)")
@click.option(
    "--cost", callback=decimal_amount, help="C_i, the participation cost (the code's if omitted)"
)
@click.option(
    "--task",
    help="the task to take part in (the code's if omitted; else fashion-mnist); a code of "
    "another task is refused",
)
@click.option(
    "--save-as",
    "save_as",
    metavar="PROFILE",
    help="keep the token (and where the market is) as a profile: later commands take "
    "--profile PROFILE or MOTS_PROFILE=PROFILE",
)
@connection
def register(
    session: Session,
    name: str,
    enrolment_code: str | None,
    type_name: str | None,
    data_size: int | None,
    cost: Decimal | None,
    task: str | None,
    save_as: str | None,
) -> None:
    """Register a client with an enrolment code (or, without one, vouched for by the operator's
    token when it is configured); prints its id, its task and its token (shown once: keep it,
    or --save-as).

    \b
    Examples:
      mots market register --name alice --code CODE --save-as alice
      mots market register --name pi-12 --code CODE --task digits --save-as pi-12
      mots market quote --profile alice
    """
    if save_as is not None:
        check_profile_name(save_as)
    if enrolment_code is None and None in (type_name, data_size, cost):
        raise click.UsageError("without --code, give --type, --data-size and --cost")
    reg = ClientRegistration(
        name=name,
        enrolment_code=enrolment_code,
        type_name=type_name,
        data_size=data_size,
        cost=cost,
        task=task,
    )
    with session.registrar(vouch=enrolment_code is None) as m:
        me = m.register(reg)
    saved = save_token(session, save_as, me.token) if save_as is not None else ""
    session.emit(
        me,
        f"client {me.id} ({me.name}, task {me.task}, type {me.type_name}, D {me.data_size}, "
        f"C {money(me.cost)})\n"
        f"token {me.token}\n"
        + (
            "status pending: the operator must approve it (`mots market approve "
            f"{me.id}`) before it is priced, declares or buys\n"
            if me.status.value == "pending"
            else ""
        )
        + (saved or "(shown once; pass it as --token or MOTS_TOKEN, or register with --save-as)"),
    )


@market.command("enrolments")
@click.option("--revoke", "revoke_id", type=click.IntRange(1), help="revoke this enrolment first")
@connection
def enrolments(session: Session, revoke_id: int | None) -> None:
    """(operator) The enrolments (task, type, uses left, expiry; never the codes), after
    revoking one.

    \b
    Example:
      mots market enrolments --revoke 2
    """
    with session.market(operator=True) as m:
        if revoke_id is not None:
            m.revoke_enrolment(revoke_id)
        out = m.enrolments()
    rows = [
        (
            e.id,
            e.task,
            e.type_name,
            e.data_size,
            money(e.cost),
            e.uses_left,
            f"{e.expires_at:%Y-%m-%d %H:%M}",
            "revoked" if e.revoked else "",
        )
        for e in out
    ]
    header = ("id", "task", "type", "D", "C", "uses left", "expires (UTC)", "")
    session.emit(out, table(rows, header))


@market.command("approve")
@click.argument("client_id", type=click.IntRange(1))
@connection
def approve(session: Session, client_id: int) -> None:
    """(operator) Make a pending self-registered client active (priced from the next round).

    \b
    Example:
      mots market approve 7
    """
    with session.market(operator=True) as m:
        out = m.approve(client_id)
    session.emit(out, f"client {out.id} ({out.name}): {out.status.value}")


@market.command("revoke")
@click.argument("client_id", type=click.IntRange(1))
@connection
def revoke(session: Session, client_id: int) -> None:
    """(operator) Revoke a client: it may no longer declare or buy.

    \b
    Example:
      mots market revoke 7
    """
    with session.market(operator=True) as m:
        out = m.revoke_client(client_id)
    session.emit(out, f"client {out.id} ({out.name}): {out.status.value}")


commands: list[click.Command] = []
"""Nothing of its own at the top level: the commands above join `mots market`."""
