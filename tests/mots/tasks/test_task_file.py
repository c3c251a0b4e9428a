"""The task file (issue 36): the shipped tasks load; each kind of mistake is refused naming its
field and rule, and a file with several mistakes lists every one of them."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from mots.tasks.task_file import SHIPPED_DIR, MarketTask, TaskFileError, load_task, parse_task

GOOD: dict[str, Any] = {
    "name": "tiny",
    "version": 1,
    "data": {
        "format": "npz",
        "input_shape": [1, 4, 4],
        "dtype": "uint8",
        "labels": ["a", "b", "c"],
        "scale": 255.0,
    },
    "model": {"architecture": "logistic"},
    "economics": {
        "scenario": {
            "types": [
                {"name": "small", "count": 2, "data_size": 10, "cost": 0.1},
                {"name": "large", "count": 1, "data_size": 30, "cost": 0.3},
            ],
            "error_model": {"eps0": 0.5, "d_gamma2": 5.0},
        },
    },
    "rounds": {"collection_window_s": 30, "fedavg_rounds": 3},
    "evaluation": {"path": "eval"},
}


def _with(path: str, value: Any) -> dict[str, Any]:
    """GOOD with the dotted ``path`` set to ``value`` (``...`` removes the key)."""
    data = copy.deepcopy(GOOD)
    *parents, last = path.split(".")
    node = data
    for p in parents:
        node = node[int(p)] if isinstance(node, list) else node.setdefault(p, {})
    if value is ...:
        del node[last]
    else:
        node[last] = value
    return data


def _problems(data: dict[str, Any], base: Path | None = None) -> str:
    with pytest.raises(TaskFileError) as err:
        parse_task(data, "tiny.yaml", base)
    return str(err.value)


@pytest.mark.parametrize("name", ["fashion-mnist", "digits", "breast-cancer"])
def test_the_shipped_tasks_load_by_name_and_by_path(name: str) -> None:
    """Each shipped file validates, by name or path, with its own model and U(ε)."""
    task = load_task(name)
    assert task == load_task(SHIPPED_DIR / f"{name}.yaml")
    assert task.name == name and task.network()["type"] == "Sequential"


def test_the_three_tasks_differ_in_shape_model_and_utility() -> None:
    """An image task, a small image task and a tabular one, each with its own U(ε)."""
    tasks = [load_task(n) for n in ("fashion-mnist", "digits", "breast-cancer")]
    assert len({t.data.input_shape for t in tasks}) == 3
    assert len({t.model.architecture for t in tasks}) == 2
    assert len({t.economics.scenario.utility.model_dump_json() for t in tasks}) == 3
    assert tasks[2].data.format == "csv" and tasks[2].data.input_shape == (30,)


def test_fashion_mnist_reuses_the_demo_scenario_file() -> None:
    """The economics read the scenario file the demo prices (one reader, mots.scenario_file)."""
    from mots.scenario_file import load_scenario

    task = load_task("fashion-mnist")
    demo = load_scenario(SHIPPED_DIR.parent / "scenarios" / "platform_demo.yaml")
    assert task.economics.scenario == demo


def test_the_good_file_validates() -> None:
    """The reference file of these tests is valid (each mistake below is its only one)."""
    assert isinstance(parse_task(GOOD), MarketTask)


MISTAKES = [
    ("name", "Tiny Task", "name: String should match pattern"),
    ("version", 0, "version: Input should be greater than or equal to 1"),
    ("data.dtype", "int7", "data.dtype: Input should be"),
    ("data.format", "parquet", "data.format: Input should be 'npz' or 'csv'"),
    ("data.input_shape", [1, 0, 4], "data.input_shape: every dimension must be ≥ 1"),
    ("data.labels", ["a", "a"], "data.labels: label 'a' is listed twice"),
    ("data.labels", ["a"], "data.labels: List should have at least 2 items"),
    ("data.scale", [1.0, 2.0], "data: scale: 2 values for 16 input features"),
    ("data.public", "imagenet", "data.public: must be one of fashion-mnist"),
    ("data.csv", {"features": ["f"], "label": "y"}, "csv: only a task of format csv"),
    ("model.architecture", "transformer", "model.architecture: architecture 'transformer' is not"),
    ("model.architecture", "no_such.module", "cannot import no_such.module"),
    ("model.args", {"hidden": [8]}, "model.args: unexpected keyword argument 'hidden'"),
    ("economics.mechanism", "vcg", "economics.mechanism: must be one of"),
    ("economics.subsidy_budget", -1, "economics.subsidy_budget: Input should be greater"),
    ("economics.scenario.types.0.cost", -0.1, "economics.scenario.types.0.cost: Input should"),
    (
        "economics.scenario",
        "missing.yaml",
        "economics.scenario: /nonexistent/missing.yaml: cannot read scenario file",
    ),
    ("rounds.fedavg_rounds", 0, "rounds.fedavg_rounds: Input should be greater than or equal"),
    ("rounds.collection_window_s", ..., "rounds.collection_window_s: Field required"),
    ("evaluation", {}, "evaluation: give exactly one of public"),
    ("app.client_app", "edge.flower_app.client_app", "app.client_app: must be 'package.module"),
    ("app.fab", "app.zip", "app.fab: must name a .fab file"),
    ("metric.name", "f1", "metric.name: Input should be 'accuracy' or 'loss'"),
    ("colour", "blue", "colour: Extra inputs are not permitted"),
]


@pytest.mark.parametrize(("path", "value", "expected"), MISTAKES, ids=[m[0] for m in MISTAKES])
def test_each_kind_of_mistake_is_named_by_field(path: str, value: Any, expected: str) -> None:
    """One mistake: refused, the message names the field and the rule."""
    assert expected in _problems(_with(path, value), Path("/nonexistent"))


def test_a_csv_task_must_name_one_column_per_feature() -> None:
    """format csv: a csv section, and input_shape [number of feature columns]."""
    data = _with("data.format", "csv")
    assert "format csv needs a csv section" in _problems(data)
    data["data"]["csv"] = {"features": ["f1", "f2"], "label": "f2"}
    assert "label column 'f2' is also a feature" in _problems(data)
    data["data"]["csv"] = {"features": ["f1", "f2"], "label": "y"}
    assert "input_shape [1, 4, 4] must be [2] for a CSV of 2 feature columns" in _problems(data)


def test_a_model_that_does_not_fit_the_data_is_refused() -> None:
    """The CNN cannot take 4×4 inputs: the model section says so."""
    message = _problems(_with("model.architecture", "cnn"))
    assert "model: cnn needs (C, H, W) images of at least 16x16, got [1, 4, 4]" in message


def test_every_problem_is_listed_at_once() -> None:
    """Mistakes in four sections: all four in one refusal, one line each."""
    data = _with("version", 0)
    data["data"]["dtype"] = "int7"
    data["economics"]["mechanism"] = "vcg"
    data["rounds"]["fedavg_rounds"] = 0
    with pytest.raises(TaskFileError) as err:
        parse_task(data, "tiny.yaml")
    fields = [line.split(":")[0].strip() for line in err.value.problems]
    assert fields == ["version", "data.dtype", "economics.mechanism", "rounds.fedavg_rounds"]


def test_unreadable_and_unknown_files(tmp_path: Path) -> None:
    """Not YAML, not a mapping, an unknown task name: one clear line each."""
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: [unclosed\n")
    with pytest.raises(TaskFileError, match="not valid YAML"):
        load_task(bad)
    bad.write_text("- a list\n")
    with pytest.raises(TaskFileError, match="expected a mapping"):
        load_task(bad)
    with pytest.raises(TaskFileError, match=r"known tasks: .*digits"):
        load_task("no-such-task")


def test_a_scenario_file_path_is_relative_to_the_task_file(tmp_path: Path) -> None:
    """economics.scenario as a path is read with the scenario-file reader, beside the task."""
    (tmp_path / "market.yaml").write_text(yaml.safe_dump(GOOD["economics"]["scenario"]))
    (tmp_path / "tiny.yaml").write_text(yaml.safe_dump(_with("economics.scenario", "market.yaml")))
    task = load_task(tmp_path / "tiny.yaml")
    assert [t.name for t in task.economics.scenario.types] == ["small", "large"]


def test_an_evaluation_folder_is_relative_to_the_task_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """evaluation.path is read beside the file, from any working directory (each service and
    the ServerApp load the file from their own); the market's stored text keeps it as sent."""
    from mots.tasks.task_file import find_task_file, parse_task_text

    (tmp_path / "tiny.yaml").write_text(yaml.safe_dump(GOOD))
    monkeypatch.chdir(SHIPPED_DIR)
    assert load_task(tmp_path / "tiny.yaml").evaluation.path == str(tmp_path / "eval")
    monkeypatch.setenv("MOTS_TASKS_DIR", str(tmp_path))
    assert find_task_file("tiny") == tmp_path / "tiny.yaml"
    assert load_task("tiny").evaluation.path == str(tmp_path / "eval")
    assert parse_task_text(yaml.safe_dump(GOOD)).evaluation.path == "eval"
    absolute = copy.deepcopy(GOOD)
    absolute["evaluation"]["path"] = "/srv/eval"  # an absolute path stays as written
    assert parse_task(absolute).evaluation.path == "/srv/eval"


def test_tasks_dir_adds_task_names(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """$MOTS_TASKS_DIR's files are found by name."""
    (tmp_path / "tiny.yaml").write_text(yaml.safe_dump(GOOD))
    monkeypatch.setenv("MOTS_TASKS_DIR", str(tmp_path))
    assert load_task("tiny").name == "tiny"
