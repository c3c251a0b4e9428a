"""``python -m edge.agent``: run the agent, start the SuperNode, or check either's health."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import click

from edge.agent.device_file import DeviceFileError, load_device_file
from edge.agent.health import agent_alive, supernode_serving
from edge.agent.runner import Agent, run_agents
from edge.agent.settings import AgentSettings
from edge.agent.supernode import exec_supernode, node_public_key
from mots.client import MarketClient


def _settings() -> AgentSettings:
    try:
        return AgentSettings()
    except ValueError as exc:  # pydantic's ValidationError names each MOTS_EDGE_ variable
        raise click.ClickException(str(exc)) from exc


@click.group()
@click.option(
    "--device-file",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="the Pi's own MOTS_EDGE_* facts (dotenv); the environment's values win",
)
def main(device_file: Path | None) -> None:
    """The MoTS edge agent (settings from MOTS_EDGE_* environment variables)."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    if device_file is not None:
        try:
            load_device_file(device_file)
        except DeviceFileError as exc:
            raise click.ClickException(str(exc)) from exc


DATA_OPTION = click.option(
    "--data",
    "data",
    multiple=True,
    metavar="TASK=PATH",
    help="this device's own data folder for a task (repeatable); the device trains on it alone",
)


def _data(items: tuple[str, ...]) -> dict[str, str]:
    from mots.training.task_data import task_data_pairs

    try:
        return task_data_pairs(list(items))
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--data") from exc


@main.command()
@click.option("--max-steps", type=int, default=None, help="stop after this many polls")
@DATA_OPTION
def run(max_steps: int | None, data: tuple[str, ...]) -> None:
    """Register with the market and answer every round with the best response (a round this
    device's data does not fit is not joined). Each task named by --data is a client of its own,
    registered with that task's code (MOTS_EDGE_ENROLMENT_CODE_FILE for fashion-mnist, the file
    beside it named <file>.<task> for another); without --data, fashion-mnist alone."""
    from mots.platform.api.tasks import DEFAULT_TASK

    folders = _data(data)
    settings = _settings()
    tasks = sorted(folders, key=lambda t: (t != DEFAULT_TASK, t)) or [DEFAULT_TASK]
    with MarketClient(settings.market_url) as market:
        agents = [Agent(settings, market, data=folders, task=t) for t in tasks]
        run_agents(agents, max_steps=max_steps)


@main.command()
@DATA_OPTION
def supernode(data: tuple[str, ...]) -> None:
    """Start the Flower SuperNode with this device's node config."""
    folders = _data(data)
    exec_supernode(_settings(), folders)


@main.command("node-key")
def node_key() -> None:
    """Print this device's SuperNode public key (PEM), making the key pair on first use."""
    click.echo(node_public_key(_settings()).decode(), nl=False)


@main.command()
@click.argument("what", type=click.Choice(["supernode", "agent"]))
def health(what: str) -> None:
    """Exit 0 when the SuperNode serves (or the agent polled recently), 1 otherwise."""
    settings = _settings()
    ok = (
        supernode_serving(settings.health_port)
        if what == "supernode"
        else agent_alive(settings.state_dir, settings.poll_interval_s)
    )
    if not ok:
        click.echo(f"{what}: unhealthy", err=True)
        sys.exit(1)


if __name__ == "__main__":
    main()
