"""`mots sweep | train | federation up|down|status`: federated training on real data (issue 3)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from mots.cli.progress import message_bar, round_bar

_DEFAULT_WORKDIR = Path("out/federation")


def _train_options(f: Any) -> Any:
    """The TrainConfig flags shared by `sweep` and `train` (defaults: TrainConfig's)."""
    opts = [
        click.option(
            "--dataset",
            type=click.Choice(["fashion-mnist", "mnist", "cifar10", "svhn"]),
            default="fashion-mnist",
            show_default=True,
        ),
        click.option(
            "--data-dir",
            type=click.Path(file_okay=False, path_type=Path),
            default=None,
            help="directory of the data set's files (default: where its Debian package puts them)",
        ),
        click.option(
            "--model", type=click.Choice(["logistic", "cnn"]), default="logistic", show_default=True
        ),
        click.option(
            "--partition",
            type=click.Choice(["iid", "label_skew"]),
            default="iid",
            show_default=True,
        ),
        click.option(
            "--sizes", default="50,120,300", show_default=True, help="D_i per type, comma-separated"
        ),
        click.option("--rounds", type=int, default=100, show_default=True, help="R"),
        click.option("--local-steps", type=int, default=20, show_default=True, help="E"),
        click.option("--batch-size", type=int, default=32, show_default=True, help="b"),
        click.option(
            "--lr",
            type=float,
            default=0.5,
            show_default=True,
            help="η0 (round r uses η0/(1+r)); the paper's MNIST value is 0.001",
        ),
        click.option(
            "--aggregation",
            type=click.Choice(["uniform", "weighted"]),
            default="uniform",
            show_default=True,
        ),
        click.option(
            "--zero-init/--random-init",
            default=True,
            show_default=True,
            help="w0 = 0 as in the paper",
        ),
        click.option(
            "--test-subset", type=int, default=None, help="evaluate on this many test samples"
        ),
    ]
    for o in reversed(opts):
        f = o(f)
    return f


def _config(seed: int = 0, **kw: Any) -> Any:
    from pydantic import ValidationError

    from mots.training.config import TrainConfig

    try:
        sizes = [int(s) for s in str(kw.pop("sizes")).split(",") if s.strip()]
    except ValueError as err:
        raise click.BadParameter(
            "must be whole numbers separated by commas", param_hint="--sizes"
        ) from err
    try:
        return TrainConfig(sizes=sizes, seed=seed, **kw)
    except ValidationError as err:
        first = err.errors()[0]
        field = ".".join(str(x) for x in first["loc"]) or "config"
        raise click.UsageError(f"{field}: {first['msg']}") from err


def _parse_k(text: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",")]
    except ValueError as err:
        raise click.BadParameter(f"{text!r} is not K_i per type, e.g. 2,0,5") from err


@click.command(short_help="Measure ε over a grid of coalitions (Fig. 5) and fit Eq. 3.")
@_train_options
@click.option("--seeds", type=int, default=2, show_default=True, help="seeds 0..n-1 per coalition")
@click.option("--k1-max", type=int, default=10, show_default=True, help="K1 = 0..k1-max (Fig. 5)")
@click.option(
    "--coalition",
    "coalitions",
    multiple=True,
    help="explicit K (e.g. 2,0,5); repeatable; replaces the Fig. 5 grid",
)
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), required=True)
def sweep(seeds: int, k1_max: int, coalitions: tuple[str, ...], out_dir: Path, **kw: Any) -> None:
    """Measure ε over a grid of coalitions (Fig. 5), fit Eq. 3 + ε0, write sweep.json and a plot.

    \b
    Example:
      mots sweep --out out/sweep --rounds 20 --seeds 1 --k1-max 4
      mots sweep --out out/sweep --coalition 2,0,5 --coalition 4,2,0 --rounds 50
    """
    from mots.training.datasets import DatasetNotFoundError
    from mots.training.sweep import fig5_coalitions, run_sweep

    cfg = _config(**kw)
    grid = [_parse_k(c) for c in coalitions] if coalitions else fig5_coalitions(k1_max)
    try:
        for k in grid:
            cfg.check_participants(k)
        with message_bar("sweep", total=len(grid) * seeds) as report:
            result = run_sweep(cfg, grid, list(range(seeds)), progress=report)
    except (DatasetNotFoundError, ValueError) as err:
        raise click.ClickException(str(err)) from err
    js, png = result.save(out_dir)
    f = result.fit
    r2 = "n/a" if f.r2 is None else f"{f.r2:.3f}"
    click.echo(
        f"fit: ε0={f.eps0:.4f} dγ²={f.d_gamma2:.3f} σ²={f.sigma2:.4f} R²={r2} ({f.n_points} points)"
    )
    for key, (m, s, n) in sorted(result.means().items(), key=lambda kv: (kv[0][1:], kv[0][0])):
        click.echo(f"  K={list(key)}  ε={m:.4f} ± {s:.4f} (n={n})")
    click.echo(f"wrote {js} and {png} in {result.seconds:.1f}s")


@click.command()
@_train_options
@click.option("--participants", "-k", required=True, help="K_i per type, e.g. 2,0,5")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option(
    "--engine",
    type=click.Choice(["inprocess", "deployment"]),
    default="inprocess",
    show_default=True,
)
@click.option(
    "--workdir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="deployment: use the federation started by `mots federation up --workdir`",
)
@click.option(
    "--artifacts",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="save each round's model here",
)
@click.option("--json", "as_json", is_flag=True)
def train(
    participants: str,
    seed: int,
    engine: str,
    workdir: Path | None,
    artifacts: Path | None,
    as_json: bool,
    **kw: Any,
) -> None:
    """Train one coalition K with FedAvg and print its test loss ε (progress on stderr).

    `--engine deployment` trains on the federation `mots federation up --workdir DIR` started;
    without `--workdir` it starts a private one for this run (said on stderr; stopped when the
    run ends, or by Ctrl-C).

    \b
    Example:
      mots train -k 2,0,5 --rounds 20
      mots federation up --workdir out/fed
      mots train -k 2,0,5 --engine deployment --workdir out/fed --rounds 5
    """
    from mots.training.datasets import DatasetNotFoundError
    from mots.training.runner import train_coalition

    cfg = _config(seed=seed, **kw)
    k = _parse_k(participants)
    fed = None
    if engine == "deployment" and workdir is not None:
        from mots.training.federation import FederationError, LocalFederation

        try:
            fed = LocalFederation.attach(workdir)
        except FederationError as err:
            raise click.ClickException(str(err)) from err
    elif engine == "deployment":
        click.echo(
            f"no --workdir: starting a private Flower federation (a SuperLink and {sum(k)} "
            f"SuperNodes, background processes) for {cfg.rounds} FedAvg rounds; it stops when "
            "the run ends, and Ctrl-C stops it. To reuse one: `mots federation up --workdir DIR`, "
            "then `mots train --engine deployment --workdir DIR`.",
            err=True,
        )
    try:
        with round_bar(f"train K={k}", total=cfg.rounds) as report:
            result = train_coalition(
                k,
                cfg,
                engine="deployment" if engine == "deployment" else "inprocess",
                federation=fed,
                progress=report,
                artifact_dir=artifacts,
            )
    except (DatasetNotFoundError, ValueError) as err:
        raise click.ClickException(str(err)) from err
    except RuntimeError as err:  # a run the federation refused or lost: one line (issue 26)
        from mots.training.deployment import DeploymentError
        from mots.training.processes import FederationError

        if not isinstance(err, DeploymentError | FederationError):
            raise
        raise click.ClickException(str(err)) from err
    out = {
        "epsilon": result.epsilon,
        "accuracy": result.accuracy,
        "losses": result.losses,
        "round_seconds": result.round_seconds,
        "artifact_path": None if result.artifact_path is None else str(result.artifact_path),
        "artifact_sha256": result.artifact_sha256,
    }
    if as_json:
        json.dump(out, sys.stdout)
        click.echo()
    else:
        acc = "" if result.accuracy is None else f", accuracy {result.accuracy:.4f}"
        click.echo(f"ε = {result.epsilon:.4f}{acc} after {len(result.losses)} rounds ({engine})")
        if result.artifact_path is not None:
            click.echo(f"model: {result.artifact_path} sha256 {result.artifact_sha256}")


@click.group()
def federation() -> None:
    """A local Flower federation: one SuperLink and one SuperNode per edge device.

    \b
    Example:
      mots federation up --nodes 20 --counts 10,5,5 --workdir out/fed
      mots federation status --workdir out/fed
      mots federation down --workdir out/fed
    """


@federation.command()
@click.option("--nodes", type=int, default=20, show_default=True)
@click.option(
    "--counts",
    default="10,5,5",
    show_default=True,
    help="nodes per client type (must sum to --nodes)",
)
@click.option(
    "--port",
    type=int,
    default=9500,
    show_default=True,
    help="SuperLink Control API port; SuperNodes use the next ones, the Fleet API the one after",
)
@click.option(
    "--workdir",
    type=click.Path(file_okay=False, path_type=Path),
    default=_DEFAULT_WORKDIR,
    show_default=True,
)
@click.option(
    "--trainer/--no-trainer",
    default=True,
    show_default=True,
    help="subprocess layout: a resident trainer per node (torch loaded once)",
)
@click.option(
    "--layout",
    type=click.Choice(["warm", "subprocess"]),
    default="warm",
    show_default=True,
    help="warm: one process per node (SuperNode + warm executor, torch loaded once); "
    "subprocess: Flower's SuperExec, a ClientApp process per message (docs/training.md)",
)
@click.option(
    "--data",
    "data",
    multiple=True,
    metavar="TASK=DIR",
    help="each node trains on its own folder DIR/type-<i>-<j> (`mots data split`), not a slice "
    "of the public set (docs/tasks.md)",
)
def up(
    nodes: int,
    counts: str,
    port: int,
    workdir: Path,
    trainer: bool,
    layout: str,
    data: tuple[str, ...],
) -> None:
    """Start the SuperLink and the SuperNodes as background processes; `down` stops them all.

    \b
    Example:
      mots federation up --nodes 4 --counts 2,1,1 --workdir out/fed
    """
    from mots.training.federation import FederationError, LocalFederation
    from mots.training.task_data import task_data_pairs

    try:
        roots = {t: str(Path(d).resolve()) for t, d in task_data_pairs(list(data)).items()}
    except ValueError as err:
        raise click.BadParameter(str(err), param_hint="--data") from err
    per_type = _parse_k(counts)
    if sum(per_type) != nodes:
        raise click.BadParameter(
            f"sums to {sum(per_type)}, --nodes is {nodes}", param_hint="--counts"
        )
    node_types = [i for i, c in enumerate(per_type) for _ in range(c)]
    fed = LocalFederation(
        n_nodes=nodes,
        node_types=node_types,
        superlink_port=port,
        workdir=workdir,
        trainer=trainer,
        layout=layout,
        task_data=roots,
    )
    try:
        fed.start()
    except FederationError as err:
        raise click.ClickException(str(err)) from err
    click.echo(
        f"federation up (TLS, SuperNode authentication, {layout} layout): Control API "
        f"{fed.address}, Fleet API {fed.fleet_address}, {nodes} SuperNodes; state and keys in {workdir}\n"
        f"they run in the background: `mots federation down --workdir {workdir}` stops them"
    )


@federation.command()
@click.option(
    "--workdir",
    type=click.Path(file_okay=False, path_type=Path),
    default=_DEFAULT_WORKDIR,
    show_default=True,
)
def down(workdir: Path) -> None:
    """Stop every process of the federation (whole process groups, spawned children included).

    \b
    Example:
      mots federation down --workdir out/fed
    """
    from mots.training.federation import FederationError, LocalFederation

    try:
        fed = LocalFederation.attach(workdir)
    except FederationError as err:
        raise click.ClickException(str(err)) from err
    left = fed.stop()
    click.echo("federation down: all processes stopped" if not left else f"still running: {left}")
    if left:
        sys.exit(1)


@federation.command()
@click.option(
    "--workdir",
    type=click.Path(file_okay=False, path_type=Path),
    default=_DEFAULT_WORKDIR,
    show_default=True,
)
@click.option("--json", "as_json", is_flag=True)
def status(workdir: Path, as_json: bool) -> None:
    """Which of the federation's processes are alive, with their memory.

    \b
    Example:
      mots federation status --workdir out/fed --json
    """
    from mots.training.federation import FederationError, LocalFederation

    try:
        fed = LocalFederation.attach(workdir)
    except FederationError as err:
        raise click.ClickException(str(err)) from err
    st = fed.status()
    if as_json:
        click.echo(json.dumps(st, indent=1))
        return
    for p in st["processes"]:
        state = "up" if p["alive"] else "DOWN"
        click.echo(
            f"{p['role']:<10} {p['name']:<12} pid {p['pid']:<8} {state:<5} {p['rss_mb']:.0f} MB"
        )


commands: list[click.Command] = [sweep, train, federation]
