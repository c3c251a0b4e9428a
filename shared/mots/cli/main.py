"""Entry point of the `mots` command: a click group that gathers the sub-commands of each area.

Each area's module (``mots.cli.<area>``) exposes ``commands``, a list of click commands.
"""

from __future__ import annotations

import importlib
import importlib.util

import click

from mots import __version__
from mots.cli.errors import JsonErrorsGroup

AREAS = (
    "economics",
    "training",
    "platform",
    "reproduce",
    "market",
    "enrolment",
    "ledger",
    "rounds",
    "data",
    "tasks",
    "model",
    "profile",
)


@click.group(
    cls=JsonErrorsGroup,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.version_option(__version__, prog_name="mots")
def cli() -> None:
    """MoTS: a market for federated-learning models, priced by the SWAN mechanism.

    Start with `mots solve examples/scenarios/paper_mnist.yaml` to see the welfare-maximising
    state, SWAN's price and rewards, and the FL framework's best for comparison.

    \b
    Example:
      mots solve examples/scenarios/paper_mnist.yaml
      mots demo --trainer inprocess
      mots COMMAND --help      # every command shows its own example
    """


for _area in AREAS:
    if importlib.util.find_spec(f"mots.cli.{_area}") is not None:
        for _command in importlib.import_module(f"mots.cli.{_area}").commands:
            cli.add_command(_command)
