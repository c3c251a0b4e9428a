"""`mots tasks …`: the tasks the market trains and sells (issue 36), over the SDK: the operator
creates (from a task file), versions and retires them; anyone with a token lists and reads them."""

from __future__ import annotations

from pathlib import Path

import click

from mots.cli.client import Session, connection, table
from mots.client.config import ConfigError
from mots.client.located import LocatedMarketClient
from mots.client.market import MarketClient
from mots.platform.api.tasks import TaskOut
from mots.tasks.task_file import TaskFileError, inline_task_text


def _reader(session: Session) -> MarketClient:
    """A market client for reading tasks: this client's token, else the operator's."""
    token = session.config.token or session.config.operator_token
    if token is None:
        raise ConfigError("no token: give --token or --operator-token (or a profile)")
    url = session.config.require("market_url")
    return LocatedMarketClient(url, token, origin=session.config.origin("market_url"))


def _line(t: TaskOut) -> str:
    model = t.spec.get("model", {}).get("architecture", "-")
    return f"task {t.name} version {t.version} ({t.status}): {model}; {t.description}"


@click.group("tasks")
def tasks() -> None:
    """The tasks the market trains and sells: one task file each (docs/tasks.md).

    A task's devices enrol with codes of its own types (`mots market enrol --task NAME`); its
    rounds, quotes, purchases and models are its own, and its figures in Prometheus carry its
    name as label `task`.

    \b
    Example:
      mots tasks create examples/tasks/digits.yaml     # the operator
      mots tasks ls
      mots tasks show digits
      mots market enrol --task digits --type type-1 --data-size 20 --cost 0.2
    """


@tasks.command("create")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@connection
def create(session: Session, file: Path) -> None:
    """(operator) Store the task FILE declares, or a new version of it (its version must be
    above the stored ones). The file is checked here first, and its scenario file, if it names
    one, is sent inline; a malformed file is refused with every problem listed by field.

    \b
    Example:
      mots tasks create examples/tasks/digits.yaml
    """
    try:
        content = inline_task_text(file)
    except TaskFileError as err:
        raise click.UsageError(str(err)) from err
    with session.market(operator=True) as m:
        out = m.create_task(content)
    session.emit(out, _line(out))


@tasks.command("ls")
@connection
def list_tasks(session: Session) -> None:
    """List the stored tasks, each at its latest version.

    \b
    Example:
      mots tasks ls
    """
    with _reader(session) as m:
        found = m.tasks()
    rows = [
        (t.name, t.version, t.status, t.spec.get("model", {}).get("architecture"), t.description)
        for t in found
    ]
    session.emit(found, table(rows, ("task", "version", "status", "model", "description")))


@tasks.command("show")
@click.argument("name")
@click.option("--version", type=click.IntRange(1), help="a stored version (default: the latest)")
@click.option("--versions", "all_versions", is_flag=True, help="every stored version")
@connection
def show(session: Session, name: str, version: int | None, all_versions: bool) -> None:
    """Show a task: its version, status and the task file as stored.

    \b
    Example:
      mots tasks show digits
      mots tasks show digits --versions
    """
    with _reader(session) as m:
        if all_versions:
            found = m.task_versions(name)
            session.emit(found, "\n".join(_line(t) for t in found))
            return
        out = m.task(name, version)
    session.emit(out, f"{_line(out)}\n\n{out.content.rstrip()}")


@tasks.command("retire")
@click.argument("name")
@connection
def retire(session: Session, name: str) -> None:
    """(operator) Retire a task: no new enrolment codes or rounds name it (its clients, rounds,
    models and money stay); creating a higher version brings it back.

    \b
    Example:
      mots tasks retire digits
    """
    with session.market(operator=True) as m:
        out = m.retire_task(name)
    session.emit(out, _line(out))


commands = [tasks]
