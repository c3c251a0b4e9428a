"""The task file: one declarative YAML file per task the market trains (issue 36).

A task names its Flower app, the data a participant provides (input shape and dtype, labels,
on-disk format), the model architecture (:mod:`mots.tasks.architectures`), the buyer's metric, the
economics (a scenario as :mod:`mots.scenario_file` reads it: client types with D_i and C_i, U(ε),
the ε prior of Eq. 3; plus the mechanism, whether ε is learned online and the subsidy budget),
the collection window and FedAvg rounds, and the evaluation data the platform holds. A file with
mistakes is refused with every problem listed by field (:class:`TaskFileError`).

``MarketTask`` because ``TaskSpec`` is the Celery contracts' name.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from mots.economics.mechanisms.registry import MECHANISMS
from mots.economics.scenario import Scenario
from mots.scenario_file import ScenarioError, load_scenario
from mots.tasks import architectures

SHIPPED_DIR = Path(__file__).resolve().parents[3] / "examples" / "tasks"
"""The task files the project ships (``examples/tasks``)."""

TASKS_DIR_ENV = "MOTS_TASKS_DIR"
"""Further directories of task files (``os.pathsep``-separated), searched before the shipped ones."""

DTYPES = ("uint8", "int64", "float32", "float64")

_STRICT = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)


class TaskFileError(ValueError):
    """A task file that cannot be read or does not validate; ``problems`` has one line per field."""

    def __init__(self, source: str, problems: list[str]) -> None:
        self.problems = problems
        self.fields = [_split_problem(p) for p in problems]
        """``(field, rule)`` per problem: the field's dotted path (``(file)``, ``(task)`` for the
        whole file) and what it broke."""
        super().__init__(f"{source} is not a valid task file:\n" + "\n".join(problems))


def _split_problem(line: str) -> tuple[str, str]:
    """``"  economics.mechanism: must be …"`` as ``("economics.mechanism", "must be …")``."""
    field, sep, rule = line.strip().partition(": ")
    return (field, rule) if sep else ("(task)", line.strip())


class AppSpec(BaseModel):
    """The Flower app that trains the task: its ClientApp and ServerApp (``module:attribute``),
    or a FAB file built with ``flwr build``."""

    model_config = _STRICT

    client_app: str = Field("edge.flower_app.client_app:app", description="module:attribute")
    server_app: str = Field("edge.flower_app.server_app:app", description="module:attribute")
    fab: str | None = Field(None, description="a .fab file instead of the modules")

    @field_validator("client_app", "server_app")
    @classmethod
    def _module_attribute(cls, value: str) -> str:
        """``package.module:attribute``."""
        module, sep, attr = value.partition(":")
        if not sep or not module or not attr.isidentifier():
            raise ValueError(f"must be 'package.module:attribute', got {value!r}")
        return value

    @field_validator("fab")
    @classmethod
    def _fab_suffix(cls, value: str | None) -> str | None:
        """A FAB is a ``.fab`` file."""
        if value is not None and not value.endswith(".fab"):
            raise ValueError(f"must name a .fab file, got {value!r}")
        return value


class CsvSpec(BaseModel):
    """A CSV file with a header row: the feature columns in the model's input order and the label
    column (its values are label names or label indices)."""

    model_config = _STRICT

    file: str = Field("data.csv", min_length=1, description="the CSV file's name in the folder")
    features: list[str] = Field(..., min_length=1, description="feature columns, in input order")
    label: str = Field(..., min_length=1, description="the label column")

    @model_validator(mode="after")
    def _distinct(self) -> CsvSpec:
        """Column names are unique and the label is not a feature."""
        seen = [c for i, c in enumerate(self.features) if c in self.features[:i]]
        if seen:
            raise ValueError(f"features: column {seen[0]!r} is listed twice")
        if self.label in self.features:
            raise ValueError(f"label column {self.label!r} is also a feature")
        return self


class DataSpec(BaseModel):
    """What a participant's data folder holds: ``.npz`` files (arrays ``x`` and ``y``) or a CSV
    with named columns; one sample's shape and dtype; the labels (label k is ``labels[k]``)."""

    model_config = _STRICT

    format: Literal["npz", "csv"]
    input_shape: tuple[int, ...] = Field(..., min_length=1, description="one sample's shape")
    dtype: Literal["uint8", "int64", "float32", "float64"]
    labels: list[str] = Field(..., min_length=2, description="label names by label index")
    offset: float | list[float] = Field(0.0, description="subtracted from inputs (per feature)")
    scale: float | list[float] = Field(1.0, description="inputs are then divided by this")
    csv: CsvSpec | None = None
    public: str | None = Field(None, description="the public set `mots data split` cuts")

    @field_validator("input_shape")
    @classmethod
    def _positive(cls, value: tuple[int, ...]) -> tuple[int, ...]:
        """Every dimension ≥ 1."""
        if any(d < 1 for d in value):
            raise ValueError(f"every dimension must be ≥ 1, got {list(value)}")
        return value

    @field_validator("labels")
    @classmethod
    def _unique(cls, value: list[str]) -> list[str]:
        """Label names are unique."""
        twice = [name for i, name in enumerate(value) if name in value[:i]]
        if twice:
            raise ValueError(f"label {twice[0]!r} is listed twice")
        return value

    @field_validator("public")
    @classmethod
    def _known_public(cls, value: str | None) -> str | None:
        """A public set this platform can read offline."""
        from mots.tasks.public import PUBLIC_SETS

        if value is not None and value not in PUBLIC_SETS:
            raise ValueError(f"must be one of {', '.join(sorted(PUBLIC_SETS))}, got {value!r}")
        return value

    @model_validator(mode="after")
    def _preprocessing_fits(self) -> DataSpec:
        """offset and scale: one number, or one per input feature; scales > 0."""
        size = architectures.flat_size(self.input_shape)
        for name in ("offset", "scale"):
            value = getattr(self, name)
            values = value if isinstance(value, list) else [value]
            if isinstance(value, list) and len(value) != size:
                raise ValueError(f"{name}: {len(value)} values for {size} input features")
            if name == "scale" and any(v <= 0 for v in values):
                raise ValueError("scale: every value must be > 0")
        return self

    @model_validator(mode="after")
    def _format_fits(self) -> DataSpec:
        """A CSV task says its columns (one per input feature); an npz task has none."""
        if self.format == "csv":
            if self.csv is None:
                raise ValueError("format csv needs a csv section (file, features, label)")
            if len(self.input_shape) != 1 or self.input_shape[0] != len(self.csv.features):
                raise ValueError(
                    f"input_shape {list(self.input_shape)} must be [{len(self.csv.features)}] "
                    f"for a CSV of {len(self.csv.features)} feature columns"
                )
        elif self.csv is not None:
            raise ValueError("csv: only a task of format csv has a csv section")
        return self

    @property
    def num_classes(self) -> int:
        """The number of labels."""
        return len(self.labels)


class ModelSpec(BaseModel):
    """The architecture, a name the registry resolves, and its arguments."""

    model_config = _STRICT

    architecture: str = Field(..., min_length=1)
    args: dict[str, Any] = Field(default_factory=dict)
    init: Literal["zero", "random"] = Field(
        "zero", description="w0 = 0 as the paper (convex models), or PyTorch's seeded default"
    )

    @field_validator("architecture")
    @classmethod
    def _registered(cls, value: str) -> str:
        """The name resolves to an architecture module."""
        architectures.resolve(value)
        return value


class MetricSpec(BaseModel):
    """The metric the buyer sees on the platform's evaluation data."""

    model_config = _STRICT

    name: Literal["accuracy", "loss"] = "accuracy"


class EconomicsSpec(BaseModel):
    """The market of the task: a scenario (inline, or a scenario file's path relative to the task
    file), the mechanism, whether the ε prior (the scenario's ``error_model``, Eq. 3) is learned
    online from the rounds' measured losses, and the platform's subsidy budget."""

    model_config = _STRICT

    scenario: Scenario
    mechanism: str = "swan"
    learned_online: bool = True
    subsidy_budget: float = Field(0.0, ge=0)

    @field_validator("scenario", mode="before")
    @classmethod
    def _scenario_file(cls, value: Any, info: ValidationInfo) -> Any:
        """A string is a scenario file, read with :func:`mots.scenario_file.load_scenario`."""
        if not isinstance(value, str):
            return value
        if (info.context or {}).get("inline_only"):
            raise ValueError(
                "give the scenario inline: a stored task reads no files "
                "(`mots tasks create` inlines a scenario file)"
            )
        base = Path((info.context or {}).get("base", "."))
        try:
            return load_scenario(base / value)
        except ScenarioError as err:
            raise ValueError(str(err)) from err

    @field_validator("mechanism")
    @classmethod
    def _known_mechanism(cls, value: str) -> str:
        """A mechanism of the economics core's registry."""
        if value not in MECHANISMS:
            raise ValueError(f"must be one of {', '.join(sorted(MECHANISMS))}, got {value!r}")
        return value


class RoundsSpec(BaseModel):
    """How a round runs: the collection window, then R FedAvg rounds of E local SGD steps of
    batch b at η_r = η0/(1+r) (Section 5)."""

    model_config = _STRICT

    collection_window_s: float = Field(..., gt=0)
    fedavg_rounds: int = Field(..., ge=1)
    local_steps: int = Field(20, ge=1)
    batch_size: int = Field(32, ge=1)
    lr: float = Field(0.5, gt=0)
    aggregation: Literal["uniform", "weighted"] = "uniform"


class EvaluationSpec(BaseModel):
    """The data the platform itself holds for the task: a public set's test split, or a folder
    in the task's own format."""

    model_config = _STRICT

    public: str | None = None
    path: str | None = None

    @field_validator("path")
    @classmethod
    def _beside_the_file(cls, value: str | None, info: ValidationInfo) -> str | None:
        """A relative folder is the task file's neighbour (read from its folder, not from the
        working directory of whichever process loads the file); a stored task's stays as sent."""
        if value is None or Path(value).is_absolute() or (info.context or {}).get("inline_only"):
            return value
        return str(Path((info.context or {}).get("base", ".")) / value)

    @model_validator(mode="after")
    def _one_source(self) -> EvaluationSpec:
        """Exactly one of ``public`` and ``path``."""
        if (self.public is None) == (self.path is None):
            raise ValueError("give exactly one of public (a public set) and path (a folder)")
        return self


class MarketTask(BaseModel):
    """One task of the market, as its file declares it."""

    model_config = _STRICT

    name: str = Field(..., pattern=r"^[a-z0-9][a-z0-9-]{0,62}$", description="lower-case slug")
    version: int = Field(..., ge=1)
    description: str = ""
    app: AppSpec = Field(default_factory=lambda: AppSpec())
    data: DataSpec
    model: ModelSpec
    metric: MetricSpec = Field(default_factory=lambda: MetricSpec())
    economics: EconomicsSpec
    rounds: RoundsSpec
    evaluation: EvaluationSpec

    @model_validator(mode="after")
    def _model_fits_data(self) -> MarketTask:
        """The architecture accepts the data's input shape and label count."""
        try:
            self.network()
        except TypeError as err:  # describe() refused an argument
            raise ValueError(f"model.args: {str(err).replace('describe() got an ', '')}") from err
        except ValueError as err:
            raise ValueError(f"model: {err}") from err
        return self

    def network(self) -> dict[str, Any]:
        """The model's network as plain data (the model file's ``network``)."""
        return architectures.describe(
            self.model.architecture, self.data.input_shape, self.data.num_classes, self.model.args
        )


def _problems(err: ValidationError) -> list[str]:
    out = []
    for e in err.errors():
        loc = ".".join(str(p) for p in e["loc"])
        msg = str(e["msg"]).removeprefix("Value error, ")
        out.append(f"  {loc}: {msg}" if loc else f"  {msg}")  # a whole-file check names its field
    return out


def parse_task(
    data: Any, source: str = "task", base: Path | None = None, *, inline_only: bool = False
) -> MarketTask:
    """Validate parsed YAML into a :class:`MarketTask`; every problem is listed by field.
    ``inline_only``: a scenario file path is a problem (the market stores what it was sent)."""
    if not isinstance(data, dict):
        raise TaskFileError(source, ["  (task): expected a mapping with name, version, data, …"])
    context = {"base": str(base or Path(".")), "inline_only": inline_only}
    try:
        return MarketTask.model_validate(data, context=context)
    except ValidationError as err:
        raise TaskFileError(source, _problems(err)) from err


def load_task_file(path: str | Path) -> MarketTask:
    """Load the task file at ``path`` (YAML, or JSON by its suffix)."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise TaskFileError(str(p), [f"  (file): cannot read it as UTF-8 text ({err})"]) from err
    try:
        data = json.loads(text) if p.suffix.lower() == ".json" else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as err:
        raise TaskFileError(str(p), [f"  (file): not valid YAML/JSON: {err}"]) from err
    return parse_task(data, str(p), p.parent)


def task_dirs() -> list[Path]:
    """Where task names are looked up: ``$MOTS_TASKS_DIR``'s directories, then the shipped ones."""
    extra = [Path(d) for d in os.environ.get(TASKS_DIR_ENV, "").split(os.pathsep) if d]
    return [*extra, SHIPPED_DIR]


def load_task(name_or_path: str | Path) -> MarketTask:
    """A task by file path, or by name (``<name>.yaml`` in :func:`task_dirs`)."""
    return load_task_file(find_task_file(name_or_path))


def find_task_file(name_or_path: str | Path) -> Path:
    """The file of a task named by path, or by name (the first ``<name>.yaml``, ``.yml`` or
    ``.json`` in :func:`task_dirs`); :class:`TaskFileError` listing the known names if none."""
    p = Path(name_or_path)
    if p.suffix.lower() in (".yaml", ".yml", ".json") or p.is_file():
        return p
    for d in task_dirs():
        for suffix in (".yaml", ".yml", ".json"):
            candidate = d / f"{name_or_path}{suffix}"
            if candidate.is_file():
                return candidate
    known = sorted({f.stem for d in task_dirs() if d.is_dir() for f in d.glob("*.y*ml")})
    raise TaskFileError(
        str(name_or_path),
        [f"  (task): no task file of that name; known tasks: {', '.join(known) or 'none'}"],
    )


class _NoAliasLoader(yaml.SafeLoader):
    """YAML without aliases: ``*name`` would let a few bytes expand to a tree too big to check
    (a "billion laughs" file); a task file has no use for them."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            mark = self.peek_event().start_mark  # type: ignore[no-untyped-call]
            raise yaml.composer.ComposerError(
                None, None, "aliases (*name) are not accepted in a task file", mark
            )
        return super().compose_node(parent, index)


def parse_task_text(text: str, source: str = "task") -> MarketTask:
    """A task file's content (YAML, of which JSON is a part) validated as the market stores it:
    the scenario inline (:func:`inline_task_text` makes a file so), no YAML aliases."""
    try:
        data = yaml.load(text, Loader=_NoAliasLoader)  # a SafeLoader: no Python objects
    except yaml.YAMLError as err:
        raise TaskFileError(source, [f"  (file): not valid YAML/JSON: {err}"]) from err
    except RecursionError as err:
        raise TaskFileError(source, ["  (file): nested too deeply"]) from err
    return parse_task(data, source, inline_only=True)


def inline_task_text(path: str | Path) -> str:
    """The task file at ``path`` as content the market accepts: validated here first (every
    problem listed), its scenario file, if it names one, written inline. A file whose scenario
    is inline already is sent as written (comments kept)."""
    p = Path(path)
    task = load_task_file(p)
    text = p.read_text(encoding="utf-8")
    data = json.loads(text) if p.suffix.lower() == ".json" else yaml.safe_load(text)
    if not isinstance(data.get("economics", {}).get("scenario"), str):
        return text
    data["economics"]["scenario"] = task.economics.scenario.model_dump(mode="json")
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True)
