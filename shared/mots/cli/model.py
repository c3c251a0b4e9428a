"""`mots model info FILE`: what a model file is, read from the file alone (issue 40 item 5).

A model file (``mots-round-N.pt2``, :mod:`mots.client.model_file`) carries its own metadata: the
task (data set, classes), the preprocessing a buyer must apply, the accuracy the platform measured
on the whole test split, ε, the coalition and the FedAvg round. This command shows them without
the ``.json`` sidecar a download writes beside it; where the sidecar is there too, it adds what
only the market knows (the market round) and checks the file's SHA-256 against it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from mots.client.model_file import (
    ModelFileError,
    file_metadata,
    read_model_info,
    sha256_file,
    sidecar_path,
    verify_origin,
)


@click.group("model")
def model() -> None:
    """A model file bought from the market: what it is, from the file alone.

    \b
    Example:
      mots model info mots-round-1.pt2
    """


def describe_file(path: Path) -> dict[str, Any]:
    """The file's own metadata (read from the archive with zipfile: nothing in it runs), its
    SHA-256 and, where a sidecar lies beside it, the market round the sidecar records (after
    checking the file against the sidecar's digest)."""
    payload = file_metadata(path)
    meta = payload.get("metadata")
    if not isinstance(meta, dict):
        raise ModelFileError(f"{path}: no metadata in the file")
    shown: dict[str, Any] = {
        "file": path.name,
        "format": payload["format"],
        "sha256": sha256_file(path),
        "metadata": meta,
    }
    if sidecar_path(path).is_file():
        side = read_model_info(path)  # refuses a file that differs from its sidecar
        shown["market_round"] = side.get("round_id")
        shown["price"] = side.get("price")
    return shown


def _lines(shown: dict[str, Any]) -> list[tuple[str, object]]:
    meta: dict[str, Any] = shown["metadata"]
    metric = meta.get("test_metric") if isinstance(meta.get("test_metric"), dict) else None
    classes = meta.get("class_names")
    accuracy = None
    if metric is not None:
        accuracy = (
            f"{float(metric['value']):.4f} on the {metric.get('split', 'test')} split "
            f"({metric.get('samples', '?')} samples, loss {float(metric.get('loss', 0)):.4f})"
        )
    elif meta.get("accuracy") is not None:
        accuracy = f"{float(meta['accuracy']):.4f} (the training's own test measurement)"
    n = meta.get("num_classes") or (len(classes) if isinstance(classes, list) else None)
    task = f"image classification into {n} classes" if n else None
    rounds = f"{meta['round']}/{meta['rounds']}" if "round" in meta and "rounds" in meta else None
    return [
        ("file", shown["file"]),
        ("format", shown.get("format")),
        ("sha256", shown["sha256"]),
        ("task", task and f"{task} ({meta.get('dataset', '?')})"),
        ("classes", ", ".join(str(c) for c in classes) if isinstance(classes, list) else None),
        ("input shape", meta.get("input_shape")),
        ("preprocessing", meta.get("preprocessing")),
        ("accuracy", accuracy),
        ("epsilon", meta.get("epsilon")),
        ("network", meta.get("model")),
        ("coalition K", meta.get("participants")),
        ("FedAvg round", rounds),
        ("market round", shown.get("market_round")),
        ("price", shown.get("price")),
    ]


@model.command("info")
@click.argument("path", type=click.Path(path_type=Path, dir_okay=False, exists=True))
@click.option("--json", "as_json", is_flag=True, help="print the file's metadata as JSON")
def info(path: Path, as_json: bool) -> None:
    """Task, classes, preprocessing, accuracy, ε, coalition and round of a model file, read
    from the file itself (no sidecar needed; one beside it must match the file).

    \b
    Example:
      mots model info mots-round-1.pt2
    """
    try:
        shown = describe_file(path)
    except ModelFileError as exc:
        raise click.ClickException(str(exc)) from exc
    if as_json:
        click.echo(json.dumps(shown, indent=1, sort_keys=True, default=str))
        return
    for key, value in _lines(shown):
        if value is not None:
            click.echo(f"{key:<14} {value}")


def _public_key(given: str) -> str:
    """``--public-key``: the base64 key itself, or a file holding it or the well-known JSON."""
    path = Path(given)
    if not path.is_file():
        return given
    text = path.read_text(encoding="utf-8").strip()
    if text.startswith("{"):
        try:
            return str(json.loads(text)["public_key"])
        except (ValueError, KeyError) as exc:
            raise click.BadParameter(f"{path}: no public_key in it ({exc})") from exc
    return text


@model.command("verify")
@click.argument("path", type=click.Path(path_type=Path, dir_okay=False, exists=True))
@click.option(
    "--public-key",
    required=True,
    help="the market's key (base64), or a file with it or with the JSON of its "
    "/.well-known/mots-model-key",
)
def verify(path: Path, public_key: str) -> None:
    """Check offline that the market whose key is given published this file: its SHA-256 is
    the one its .json records, and the market signed that round, digest and price.

    The key is the market's, saved once from its /.well-known/mots-model-key (e.g. `curl -s
    MARKET_URL/.well-known/mots-model-key > market-key.json`); no server is asked here.

    \b
    Example:
      mots model verify mots-round-1.pt2 --public-key market-key.json
    """
    try:
        info_ = verify_origin(path, _public_key(public_key))
    except ModelFileError as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(
        f"{path.name}: signed by the market (key {info_.get('key_id')}): round "
        f"{info_.get('round_id')}, price {info_.get('price')}, SHA-256 {info_.get('sha256')}"
    )


commands: list[click.Command] = [model]
