"""Every `mots` command's --help shows an example of itself, and fits 80 columns (issue 17)."""

from __future__ import annotations

import re
from collections.abc import Iterator

import click
import pytest
from click.testing import CliRunner

from mots.cli.main import cli


def _commands(cmd: click.Command, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    yield path
    if isinstance(cmd, click.Group):
        for name, sub in sorted(cmd.commands.items()):
            yield from _commands(sub, (*path, name))


ALL = list(_commands(cli))


@pytest.mark.parametrize("path", ALL, ids=lambda p: " ".join(p) or "mots")
def test_help_has_an_example_of_the_command(path: tuple[str, ...]) -> None:
    """An ``Example:`` block whose lines run this very command (``mots <path> …``)."""
    out = CliRunner().invoke(cli, [*path, "--help"], terminal_width=80).output
    block = re.search(r"^\s*Examples?(?: \(.*\))?:\n((?:[ \t]+\S.*\n?)+)", out, re.MULTILINE)
    assert block, f"`mots {' '.join(path)} --help` has no Example block:\n{out}"
    runs = [line.strip() for line in block.group(1).splitlines()]
    wanted = " ".join(("mots", *path))
    assert any(line.startswith(wanted) for line in runs), (wanted, runs)


def test_the_tree_is_walked() -> None:
    """The parametrisation sees the groups and their sub-commands."""
    assert {(), ("solve",), ("federation",), ("federation", "up")} <= set(ALL)
