"""`mots reproduce`: the paper's evaluation end to end (Figs. 5-9 and a Markdown report)."""

from __future__ import annotations

from pathlib import Path

import click

from mots.cli.progress import message_bar
from mots.reproduce.measure import DEFAULT_DATA_DIR
from mots.reproduce.settings import SETTINGS


@click.command(
    "reproduce",
    short_help="Reproduce the paper's evaluation (Figs. 5-9): PNG figures and a report.",
    epilog=(
        "\b\nExamples:\n"
        "  mots reproduce --quick             # minutes on 2 cores, 1 run, few rounds\n"
        "  mots reproduce --full --seeds 30   # the paper's R = 500/600, 30 runs (hours)\n"
        "  mots reproduce --quick --rounds 10 --settings iid_logistic --out /tmp/r\n\n"
        "Re-running with the same configuration re-uses OUT/measured/*.json and only redoes "
        "the sweeps, figures and report (seconds); an interrupted run resumes from "
        "OUT/measured/*.partial.jsonl; --retrain forces new training."
    ),
)
@click.option(
    "--quick/--full",
    "quick",
    default=True,
    show_default=True,
    help="quick: few rounds, 1 run, 2,000 test images; full: the paper's rounds and 30 runs.",
)
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("out/reproduce"),
    show_default=True,
    help="Directory for report.md, the PNG figures, results.json and the training cache.",
)
@click.option(
    "--seeds",
    type=click.IntRange(min=1),
    default=None,
    help="Independent training runs per coalition [quick: 1, full: 30].",
)
@click.option(
    "--rounds",
    type=click.IntRange(min=1),
    default=None,
    help="Communication rounds R for every setting [quick: 100 logistic / 3 CNN; full: 500 / 600].",
)
@click.option(
    "--test-subset",
    type=click.IntRange(min=1),
    default=None,
    help="Evaluate ε on the first N test images [quick: 2000; full: all 10,000].",
)
@click.option(
    "--points",
    type=click.IntRange(min=2),
    default=16,
    show_default=True,
    help="Points per sweep axis (cost, ε_req).",
)
@click.option(
    "--settings",
    "settings",
    default=",".join(SETTINGS),
    show_default=True,
    help=f"Comma-separated settings to run: {', '.join(SETTINGS)}.",
)
@click.option(
    "--data-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=DEFAULT_DATA_DIR,
    show_default=True,
    help="Fashion-MNIST IDX files (apt-get install dataset-fashion-mnist).",
)
@click.option(
    "--workers",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Training runs at once, each in its own process (use the cores of a big machine).",
)
@click.option(
    "--retrain", is_flag=True, help="Ignore cached (and partial) measurements and train again."
)
def reproduce(
    quick: bool,
    out_dir: Path,
    seeds: int | None,
    rounds: int | None,
    test_subset: int | None,
    points: int,
    settings: str,
    data_dir: Path,
    workers: int,
    retrain: bool,
) -> None:
    """Reproduce the paper's evaluation: Fig. 5 (network effects, measured vs Eq. 3), Figs. 6-7 (SWAN vs
    the Dynamic and Modified FL mechanisms), Figs. 8-9 (MoTS vs FL, with the percentage improvements
    beside the paper's), written as PNGs and OUT/report.md.

    Each setting trains Fig. 5's 22 coalitions (K1 = 0..10 with (K2, K3) = (5, 0) and (0, 5)) with
    real federated training on Fashion-MNIST, fits ε = ε0 + dγ²·Σ K_i/D_i / K² + σ²·(K−1)/K, and
    runs the market sweeps on the fitted model.
    """
    from mots.reproduce.pipeline import ReproduceOptions, run_reproduction

    chosen = tuple(s.strip() for s in settings.split(",") if s.strip())
    bad = [s for s in chosen if s not in SETTINGS]
    if bad or not chosen:
        raise click.BadParameter(
            f"unknown {bad}; choose from {', '.join(SETTINGS)}"
            if bad
            else "name at least one setting",
            param_hint="--settings",
        )
    parts = ["mots reproduce", "--quick" if quick else "--full"]
    for flag, value in (("--seeds", seeds), ("--rounds", rounds), ("--test-subset", test_subset)):
        if value is not None:
            parts.append(f"{flag} {value}")
    options = ReproduceOptions.for_profile(
        "quick" if quick else "full",
        seeds=seeds,
        rounds=rounds,
        test_subset=test_subset if test_subset is not None else "default",
        out_dir=out_dir,
        data_dir=data_dir,
        settings=chosen,
        points=points,
        reuse=not retrain,
        workers=workers,
        command=" ".join(parts),
    )
    with message_bar("reproduce") as report:
        doc = run_reproduction(options, progress=report)
    click.echo(f"wrote {out_dir / 'report.md'} ({doc['seconds']:.0f} s)")
    for s in doc["settings"]:
        for key, imp in s["improvements"].items():
            w, ic = imp["welfare"]["mean_pct"], imp["incentive"]["mean_pct"]
            click.echo(
                f"  {s['setting']} {key}: welfare {_fmt(w)} (paper {imp['paper_welfare']:+.2f}%), "
                f"incentive cost {_fmt(ic)} (paper {imp['paper_incentive']:+.2f}%)"
            )


def _fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:+.2f}%"


commands = [reproduce]
