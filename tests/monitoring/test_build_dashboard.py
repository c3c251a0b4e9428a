"""The dashboard is generated from monitoring/grafana/build_dashboard.py: its files are up to date,
every metric the services export has a panel, and every panel names its unit and legend."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest
from prometheus_client import REGISTRY

ROOT = Path(__file__).parents[2]


def _builder() -> ModuleType:
    path = ROOT / "monitoring/grafana/build_dashboard.py"
    spec = importlib.util.spec_from_file_location("build_dashboard", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


BUILD = _builder()


def exported_metrics(tmp_path: Path) -> set[str]:
    """The names of every mots_* metric family the services' registries hold (every family of
    mots.platform.metrics, the market's ledger collector pointed at a migrated database)."""
    import mots.platform.metrics  # noqa: F401  (its families registered)
    from mots.platform.db import make_engine, make_sessionmaker
    from services.market.metrics import watch_ledger
    from services.market.migrations import upgrade

    url = f"sqlite:///{tmp_path / 'market.db'}"
    upgrade(url)
    engine = make_engine(url)
    watch_ledger(make_sessionmaker(engine))
    names = set()
    for family in REGISTRY.collect():
        if family.name.startswith("mots_"):
            names.add(family.name + ("_total" if family.type == "counter" else ""))
    engine.dispose()
    return names


def _series_in(expr: str) -> set[str]:
    """The metric families an expression reads (histogram and counter suffixes folded)."""
    found = set(re.findall(r"\bmots_[a-z0-9_]+", expr))
    return {re.sub(r"_(bucket|sum|count)$", "", n) for n in found}


def test_the_dashboard_files_are_what_the_generator_builds() -> None:
    """Both copies (docker/local and Kubernetes) are the generator's output, byte for byte."""
    assert BUILD.main(["--check"]) == 0, "run python monitoring/grafana/build_dashboard.py"


def test_every_exported_metric_has_a_panel(tmp_path: Path) -> None:
    """A test-only metric without a panel fails the check; the services' own metrics all pass."""
    panels = [p for _, section in BUILD.sections() for p in section]
    shown = set().union(*(_series_in(t.expr) for p in panels for t in p.targets))
    exported = exported_metrics(tmp_path)
    assert "mots_http_requests_total" in exported and "mots_ledger_balance" in exported
    assert sorted(exported - shown) == []
    assert sorted((exported | {"mots_not_on_the_dashboard"}) - shown) == [
        "mots_not_on_the_dashboard"
    ]


@pytest.mark.parametrize(
    "panel", [p for _, s in BUILD.sections() for p in s], ids=lambda p: p.title
)
def test_every_panel_has_a_unit_a_legend_and_a_window(panel: object) -> None:
    """Title, unit, a legend naming each label the series are split by, counters over a window."""
    assert panel.title and panel.unit and panel.description  # type: ignore[attr-defined]
    for t in panel.targets:  # type: ignore[attr-defined]
        assert t.legend, t.expr
        for by in re.findall(r"sum by \(([^)]*)\)", t.expr):
            for label in (s.strip() for s in by.split(",")):
                across = label == "task" and t.across_tasks  # summed by task, then over them
                assert label == "le" or across or "{{" + label + "}}" in t.legend, (label, t.legend)
        for name in re.findall(r"\bmots_[a-z0-9_]+", t.expr):
            if name in _cumulative():
                window = rf"(rate|increase)\({name}(\{{[^}}]*\}})?\[\d+[smh]\]\)"
                assert re.search(window, t.expr), (name, t)


def _cumulative() -> set[str]:
    """The series of every counter and histogram of the platform: they only make sense over a
    window (the ledger's ``mots_ledger_balance`` is a gauge; it was ``mots_ledger_total``, a gauge
    named like a counter, until promtool flagged it)."""
    import mots.platform.metrics  # noqa: F401  (its families registered)

    suffixes = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count")}
    return {
        f.name + s
        for f in REGISTRY.collect()
        if f.name.startswith("mots_")
        for s in suffixes.get(f.type, ())
    }


def test_the_dashboard_imports_into_any_grafana() -> None:
    """No fixed data source uid: the panels and their queries read the ``datasource`` variable,
    which Grafana's import dialog fills from the ``__inputs`` entry DS_PROMETHEUS; a ``job``
    variable (All by default) narrows every ``mots_*`` selector of every query; the fleet row's
    device series select the edge devices' job, mots-edge-nodes."""
    import json

    dash = json.loads((ROOT / "monitoring/grafana/dashboards/mots.json").read_text())
    assert [(i["name"], i["type"], i["pluginId"]) for i in dash["__inputs"]] == [
        ("DS_PROMETHEUS", "datasource", "prometheus")
    ]
    variables = {v["name"]: v for v in dash["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    assert variables["datasource"]["current"]["value"] == "${DS_PROMETHEUS}"
    assert variables["job"]["includeAll"] and variables["job"]["allValue"] == ".*"
    panels = [p for p in dash["panels"] if p["type"] != "row"]
    uids = {p["datasource"]["uid"] for p in panels}
    uids |= {t["datasource"]["uid"] for p in panels for t in p["targets"]}
    assert uids == {"${datasource}"}
    for p in panels:
        for t in p["targets"]:
            selectors = re.findall(r"\bmots_[a-z0-9_]+(\{[^}]*\})?", t["expr"])
            assert all('job=~"$job"' in s for s in selectors), (p["title"], t)
            # the fleet row's device series (node-exporter's, and its up) name their one job
            devices = re.findall(r"\b(?:node_[A-Za-z0-9_]+|up)\b(\{[^}]*\})?", t["expr"])
            assert selectors or devices, (p["title"], t)
            assert all('job="mots-edge-nodes"' in s for s in devices), (p["title"], t)


def task_families(tmp_path: Path) -> set[str]:
    """The ``mots_*`` families the services export with a ``task`` label (issue 36), named as a
    query reads them (a counter with its ``_total``): the platform's metrics by their label names
    (a labelled family exports nothing before its first label set), the market's ledger gauge by
    what it collects."""
    from prometheus_client.metrics import MetricWrapperBase

    from mots.platform import metrics

    exported_metrics(tmp_path)  # the lazy metrics created, the ledger collector registered
    found = set()
    for value in vars(metrics).values():
        if isinstance(value, MetricWrapperBase) and "task" in value._labelnames:
            found.add(value._name + ("_total" if value._type == "counter" else ""))
    for f in REGISTRY.collect():
        if f.name == "mots_ledger_balance" and all("task" in s.labels for s in f.samples):
            found.add(f.name)
    return found


def test_the_task_variable_narrows_every_per_task_series(tmp_path: Path) -> None:
    """A ``task`` variable (All by default, the tasks whose rounds Prometheus has seen); every
    selector of a family that carries the task label reads ``task=~"$task"``, and the builder's
    list of those families is the services' own."""
    import json

    families = task_families(tmp_path)
    assert {"mots_reward", "mots_rounds_total", "mots_ledger_balance"} <= families
    assert "mots_http_requests_total" not in families
    assert families == BUILD.TASK_METRICS
    dash = json.loads((ROOT / "monitoring/grafana/dashboards/mots.json").read_text())
    variables = {v["name"]: v for v in dash["templating"]["list"]}
    task = variables["task"]
    assert task["includeAll"] and task["multi"] and task["allValue"] == ".*"
    assert task["definition"] == "label_values(mots_rounds_total, task)"
    checked = 0
    for p in dash["panels"]:
        for t in p.get("targets", []):
            for name, selector in re.findall(r"\b(mots_[a-z0-9_]+)(\{[^}]*\})?", t["expr"]):
                per_task = BUILD.family(name) in families
                assert ('task=~"$task"' in selector) == per_task, (p["title"], t["expr"])
                checked += per_task
    assert checked > 20
    assert 'task=~"$task"' not in BUILD.scoped("mots_http_requests_total")  # the check can fail


@pytest.mark.parametrize(
    "panel", [p for _, s in BUILD.sections() for p in s], ids=lambda p: p.title
)
def test_every_per_task_query_keeps_the_tasks_apart(panel: object) -> None:
    """Two tasks' figures never add up unseen: a query of per-task series names the task in its
    legend (and keeps it in each ``sum by``), unless it is marked as aggregating over every task
    (then its legend cannot name one)."""
    for t in panel.targets:  # type: ignore[attr-defined]
        names = {BUILD.family(n) for n in re.findall(r"\bmots_[a-z0-9_]+", t.expr)}
        if not names & BUILD.TASK_METRICS:
            continue
        if t.across_tasks:
            assert "{{task}}" not in t.legend, t
            continue
        assert "{{task}}" in t.legend, (panel.title, t)  # type: ignore[attr-defined]
        for by in re.findall(r"sum by \(([^)]*)\)", t.expr):
            assert "task" in {s.strip() for s in by.split(",")}, (panel.title, t.expr)  # type: ignore[attr-defined]
