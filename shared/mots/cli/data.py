"""`mots data check | split`: a participant's own data for a task (issue 36)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from mots.tasks.task_file import MarketTask


def _task(name_or_path: str) -> MarketTask:
    """The task by file or name; a task file's problems as the command's error."""
    from mots.tasks.task_file import TaskFileError, load_task

    try:
        return load_task(name_or_path)
    except TaskFileError as err:
        raise click.ClickException(str(err)) from err


@click.group("data")
def data() -> None:
    """A participant's own data for a task: check it fits, or cut demo folders.

    \b
    Example:
      mots data split breast-cancer out/data
      mots data check breast-cancer out/data/type-1-000
    """


@data.command("check")
@click.argument("task")
@click.argument("path", type=click.Path(path_type=Path))
@click.option(
    "--data-size",
    type=int,
    default=None,
    help="the D you attest; fewer samples do not fit (default: the task's smallest type's D)",
)
def check(task: str, path: Path, data_size: int | None) -> None:
    """Say in plain words whether the data folder PATH fits TASK (a task file or a task's name):
    input shape, dtype, labels, sample count. Exits 1 when it does not fit.

    \b
    Example:
      mots data split breast-cancer out/data
      mots data check breast-cancer out/data/type-1-000
      mots data check breast-cancer out/data/type-3-000 --data-size 60
    """
    from mots.tasks.local_data import check_data

    spec = _task(task)
    smallest = min(int(t.data_size) for t in spec.economics.scenario.types)
    result = check_data(spec.name, spec.data, path, data_size or smallest)
    click.echo(result.summary())
    if not result.ok:
        sys.exit(1)


@data.command("split")
@click.argument("task")
@click.argument("out", type=click.Path(file_okay=False, path_type=Path))
@click.option("--sizes", default=None, help="D_i per type, comma-separated (default: the task's)")
@click.option("--counts", default=None, help="N_i per type, comma-separated (default: the task's)")
@click.option(
    "--partition", type=click.Choice(["iid", "label_skew"]), default="iid", show_default=True
)
@click.option("--seed", type=int, default=0, show_default=True)
def split(
    task: str, out: Path, sizes: str | None, counts: str | None, partition: str, seed: int
) -> None:
    """Cut one data folder per participant (OUT/type-<i>-<j>) from TASK's public set, for demos:
    the same samples the training code's partition gives client j of type i.

    \b
    Example:
      mots data split breast-cancer out/data
      mots data split digits out/digits --counts 2,1,1 --partition label_skew
    """
    from mots.tasks.split import split_public

    spec = _task(task)

    def ints(raw: str | None, name: str) -> tuple[int, ...] | None:
        if raw is None:
            return None
        try:
            return tuple(int(x) for x in raw.split(","))
        except ValueError as err:
            raise click.UsageError(f"--{name}: integers separated by commas, got {raw!r}") from err

    try:
        folders = split_public(
            spec,
            out,
            sizes=ints(sizes, "sizes"),
            counts=ints(counts, "counts"),
            partition=partition,  # type: ignore[arg-type]
            seed=seed,
        )
    except (ValueError, ImportError, FileNotFoundError) as err:
        raise click.ClickException(str(err)) from err
    click.echo(f"{len(folders)} participants' folders of task {spec.name} under {out}")


commands = [data]
