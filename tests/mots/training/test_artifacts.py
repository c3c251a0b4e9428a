"""Artifacts: each round's model with metadata and SHA-256; verify refuses tampering."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mots.training import artifacts
from mots.training.config import TrainConfig
from mots.training.runner import train_coalition


def test_train_coalition_saves_every_round(tiny: TrainConfig, tmp_path: Path) -> None:
    """R artifacts + manifest; the last one's digest is the result's; its test loss is ε."""
    res = train_coalition([1, 0, 2], tiny, artifact_dir=tmp_path)
    manifest = json.loads((tmp_path / "manifest.json").read_text())["artifacts"]
    assert [a["round"] for a in manifest] == [1, 2, 3]
    assert res.artifact_path == tmp_path / "round-0003.pt2"
    assert res.artifact_sha256 == manifest[-1]["sha256"]
    assert artifacts.verify(res.artifact_path, res.artifact_sha256)
    _, meta = artifacts.load_artifact(res.artifact_path, res.artifact_sha256)
    assert (
        meta["participants"] == [1, 0, 2]
        and meta["round"] == 3
        and meta["dataset"] == "fashion-mnist"
    )
    assert meta["epsilon"] == pytest.approx(res.epsilon)
    sidecar = json.loads(res.artifact_path.with_suffix(".json").read_text())
    assert sidecar["sha256"] == res.artifact_sha256
    loss, acc = artifacts.evaluate(res.artifact_path, test_subset=tiny.test_subset)
    assert loss == pytest.approx(res.epsilon, rel=1e-5) and 0.0 < acc <= 1.0


def test_tampered_artifact_refused(tiny: TrainConfig, tmp_path: Path) -> None:
    """One changed byte: verify is False and loading with the published digest raises."""
    res = train_coalition([0, 0, 1], tiny.model_copy(update={"rounds": 1}), artifact_dir=tmp_path)
    assert res.artifact_path is not None and res.artifact_sha256 is not None
    raw = bytearray(res.artifact_path.read_bytes())
    raw[-100] ^= 0xFF
    res.artifact_path.write_bytes(bytes(raw))
    assert not artifacts.verify(res.artifact_path, res.artifact_sha256)
    with pytest.raises(artifacts.ArtifactError, match="SHA-256"):
        artifacts.load_artifact(res.artifact_path, res.artifact_sha256)


def test_metadata_required(tmp_path: Path) -> None:
    """An artifact without its coalition or ε is refused, naming the missing key."""
    with pytest.raises(artifacts.ArtifactError, match=r"metadata\.epsilon"):
        artifacts.save_artifact(
            tmp_path / "m.pt2",
            [],
            [],
            {"dataset": "x", "model": "logistic", "participants": [1], "round": 1},
        )


@pytest.mark.parametrize("name", ["logistic", "cnn"])
def test_the_network_description_rebuilds_the_model_with_torch_alone(name: str) -> None:
    """describe_network → torch.nn: the same state_dict keys and shapes, and the same logits."""
    import torch

    from mots.client.model_file import build_network
    from mots.training.models import build_model, describe_network

    ours = build_model(name, (1, 28, 28), 10, seed=3)
    rebuilt = build_network(describe_network(name, (1, 28, 28), 10))
    assert {k: v.shape for k, v in rebuilt.state_dict().items()} == {
        k: v.shape for k, v in ours.state_dict().items()
    }
    rebuilt.load_state_dict(ours.state_dict())
    x = torch.rand(7, 1, 28, 28)
    assert torch.equal(rebuilt.eval()(x), ours.eval()(x))


def test_the_model_file_carries_what_a_buyer_needs(tiny: TrainConfig, tmp_path: Path) -> None:
    """network, preprocessing, input shape, class names and the whole test split's accuracy;
    both load_model functions mean one thing: the file's exported network, digest checked."""
    import torch

    from mots.client import model_file

    res = train_coalition([0, 0, 1], tiny.model_copy(update={"rounds": 1}), artifact_dir=tmp_path)
    assert res.artifact_path is not None and res.artifact_sha256 is not None
    _, meta = artifacts.load_artifact(res.artifact_path)
    assert meta["input_shape"] == [1, 28, 28] and meta["class_names"][9] == "Ankle boot"
    assert meta["preprocessing"]["divide_by"] == 255.0
    metric = meta["test_metric"]
    assert (metric["name"], metric["split"], metric["samples"]) == ("accuracy", "test", 10000)
    _, acc = artifacts.evaluate(res.artifact_path)  # the platform's own evaluation, all 10,000
    assert metric["value"] == pytest.approx(acc, abs=1e-9)
    a = artifacts.load_model(res.artifact_path, res.artifact_sha256)
    b = model_file.load_model(res.artifact_path, res.artifact_sha256)
    assert isinstance(a, torch.nn.Module) and isinstance(b, torch.nn.Module)
    x = torch.rand(3, 1, 28, 28)
    assert torch.equal(a(x), b(x))
    with pytest.raises(model_file.ModelFileError, match="SHA-256"):
        model_file.load_model(res.artifact_path, "0" * 64)


@pytest.mark.parametrize("model", ["logistic", "cnn"])
def test_the_one_call_load_predicts_as_the_platforms_model_on_the_test_set(
    model: str, tiny: TrainConfig, tmp_path: Path
) -> None:
    """A buyer's one call with PyTorch alone, ``torch.export.load(path).module()``, gives the
    logits of the network the platform builds and evaluates, on all 10,000 Fashion-MNIST test
    images (any batch size: the file is exported with a dynamic batch dimension)."""
    import torch

    from mots.training.datasets import load_dataset, to_float

    config = tiny.model_copy(update={"rounds": 1, "model": model})
    res = train_coalition([0, 0, 1], config, artifact_dir=tmp_path)
    assert res.artifact_path is not None and res.artifact_path.suffix == ".pt2"
    bought = torch.export.load(res.artifact_path).module()  # the README's one call
    platform = artifacts.platform_model(res.artifact_path, res.artifact_sha256)
    ds = load_dataset("fashion-mnist", tiny.data_dir)
    x = torch.from_numpy(to_float(ds.x_test))
    with torch.no_grad():
        for batch in (x[:1], x[1:4097], x[4097:]):
            assert torch.equal(bought(batch), platform(batch))
        predicted = bought(x).argmax(1).numpy()
    accuracy = float((predicted == ds.y_test).mean())
    _, meta = artifacts.load_artifact(res.artifact_path)
    assert accuracy == pytest.approx(meta["test_metric"]["value"], abs=1e-9)


def test_two_threads_write_and_load_model_files_at_once(tmp_path: Path) -> None:
    """The training worker trains two tasks' rounds in two threads of one process: their
    ``torch.export`` calls (export, save, load) share global tracing state and once failed the
    in-process demo ('ProxyTorchDispatchMode slot already occupied'); EXPORT_LOCK takes turns."""
    import threading

    from mots.client.model_file import load_model
    from mots.training.models import build_model, describe_network

    model = build_model("cnn", (1, 28, 28), 10, seed=1)
    names = list(model.state_dict())
    weights = [v.detach().numpy() for v in model.state_dict().values()]
    meta = {"dataset": "fashion-mnist", "model": "cnn", "participants": [1], "round": 1,
            "epsilon": 0.5, "network": describe_network("cnn", (1, 28, 28), 10),
            "input_shape": [1, 28, 28]}  # fmt: skip
    errors: list[BaseException] = []
    start = threading.Barrier(3)

    def work(k: int) -> None:
        start.wait()
        try:
            for i in range(4):
                path = tmp_path / f"t{k}-{i}.pt2"
                artifacts.save_artifact(path, names, weights, meta)
                load_model(path)
        except BaseException as exc:  # reported below, after the join
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
