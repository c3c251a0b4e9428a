"""A task the market stores and no task file names (issue 36): created only through
``POST /v1/tasks`` (its file in a folder off ``$MOTS_TASKS_DIR``), its round opens at the
orchestration pinned to the stored version, is priced with that version's economics, trains and
evaluates on that version (a version stored mid-round waits for the next round) and publishes;
once retired, no round of it opens (409 naming ``task``)."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
import yaml

from mots.client.model_file import file_metadata
from mots.economics.utility import PowerUtility
from mots.local.agents import act, choose, register_population, wait_for_quote
from mots.local.demo import wait_round
from mots.platform.settings import DEV_OPERATOR_TOKEN
from mots.tasks.task_file import SHIPPED_DIR, inline_task_text, load_task, task_dirs
from tests.services.orchestration.conftest import OPERATOR
from tests.services.orchestration.test_rounds import _ledger_balanced

pytestmark = pytest.mark.integration

NAME = "digits-stored"
TYPES = [
    {"name": "type-1", "count": 3, "data_size": 20, "cost": "0.05"},
    {"name": "type-3", "count": 2, "data_size": 100, "cost": "0.25"},
]
UTILITY = {"kind": "power", "scale": 3.5, "exponent": 2.0}
"""Not digits' U(ε): the round must price with the stored file's, not a file's of that shape."""
PRIOR = {"eps0": 0.45, "d_gamma2": 9.0, "sigma2": 0.0}


def _stored_copy(tmp: Path) -> tuple[Path, str]:
    """digits' task file under another name and economics, written to a folder no task lookup
    searches: its path and its content as the market accepts it."""
    data = yaml.safe_load((Path(SHIPPED_DIR) / "digits.yaml").read_text(encoding="utf-8"))
    data["name"] = NAME
    data["economics"]["scenario"]["utility"] = UTILITY
    data["economics"]["scenario"]["error_model"] = PRIOR
    data["economics"]["learned_online"] = False  # priced with the stored prior as it is
    path = tmp / "elsewhere" / f"{NAME}.yaml"
    path.parent.mkdir(parents=True)
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    assert path.parent not in task_dirs()
    return path, inline_task_text(path)


def _version_2(path: Path) -> str:
    """Version 2 of the stored task, unlike version 1 in every part a round reads: its U(ε), its
    architecture (a wider hidden layer) and its FedAvg rounds."""
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    data["version"] = 2
    data["economics"]["scenario"]["utility"] = {"kind": "power", "scale": 9.0, "exponent": 2.0}
    data["model"]["args"] = {"hidden": [64]}
    data["rounds"]["fedavg_rounds"] = 3
    return yaml.safe_dump(data, sort_keys=False)


def _sample(stack, process: str, metric: str, which: str) -> float | None:
    """``metric``'s sample labelled with the stored task (and ``which`` source or parameter) on
    the process's /metrics."""
    from prometheus_client.parser import text_string_to_metric_families

    text = httpx.get(stack.metrics_url(process), timeout=10).text
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == metric and s.labels.get("task") == NAME and which in s.labels.values():
                return float(s.value)
    return None


def test_a_task_stored_only_at_the_market_runs_a_round_to_publication(platform, tmp_path) -> None:
    """POST /v1/rounds knows the stored task (202, not 404) and pins its version 1; its quote's
    scenario has the stored U(ε) and ε prior; version 2 (another U(ε), architecture and FedAvg
    rounds) stored while the round collects does not touch it: the round trains version 1 (its
    model file names the task at version 1, with version 1's network), is measured and
    published showing task_version 1, and ledger-check is exact. Retired, the task opens no
    round."""
    stack, market, orchestration, _ = platform
    with pytest.raises(Exception, match="no task file of that name"):
        load_task(NAME)
    path, content = _stored_copy(tmp_path)
    r = market.post("/v1/tasks", json={"content": content}, headers=OPERATOR)
    assert r.status_code == 201, r.text
    agents = register_population(market, TYPES, DEV_OPERATOR_TOKEN, deposit="10", task=NAME)

    opened = orchestration.post("/v1/rounds", json={"task": NAME})
    assert opened.status_code == 202, opened.text
    round_id = opened.json()["round_id"]
    quote = wait_for_quote(market, agents[0], round_id)
    newer = market.post("/v1/tasks", json={"content": _version_2(path)}, headers=OPERATOR)
    assert newer.status_code == 201, newer.text
    act(market, agents, round_id, choose(agents, quote, PowerUtility.model_validate(UTILITY)))
    body = wait_round(orchestration, round_id, 120)
    assert body["state"] == "published", body
    assert (body["task"], body["task_version"]) == (NAME, 1)
    assert body["scenario"]["utility"] == pytest.approx(UTILITY)
    assert body["scenario"]["error_model"] == pytest.approx(PRIOR)
    assert body["mechanism"] == "swan"
    assert body["measured_epsilon"] > 0
    _ledger_balanced(market)
    predicted = _sample(stack, "orchestration-worker", "mots_generalization_error", "predicted")
    assert predicted == pytest.approx(body["predicted_epsilon"])
    measured = _sample(stack, "evaluation-worker", "mots_generalization_error", "measured")
    assert measured == pytest.approx(body["measured_epsilon"])
    assert _sample(stack, "evaluation-worker", "mots_error_model_parameter", "eps0") is not None
    model = tmp_path / "model.pt"
    got = [market.get(f"/v1/rounds/{round_id}/model", headers=a.auth) for a in agents]
    model.write_bytes(next(g.content for g in got if g.status_code == 200))
    meta = file_metadata(model)["metadata"]  # the model the stored definition trained
    assert meta["task"] == {"name": NAME, "version": 1}
    assert meta["network"] == load_task(path).network()  # version 1's hidden layer, not 2's

    assert market.delete(f"/v1/tasks/{NAME}", headers=OPERATOR).status_code == 200
    refused = orchestration.post("/v1/rounds", json={"task": NAME})
    assert refused.status_code == 409, refused.text
    assert "task" in refused.json()["detail"] and "retired" in refused.json()["detail"]
    unknown = orchestration.post("/v1/rounds", json={"task": "no-such-task"})
    assert unknown.status_code == 404, unknown.text
    assert "task" in unknown.json()["detail"]


@pytest.mark.slow  # the market's API and worker, a local federation and a Flower run: about a minute
def test_a_market_only_task_trains_on_flower_from_the_stored_definition(
    redis_url: str, tmp_path: Path
) -> None:
    """The training worker's trainer (the Flower deployment engine) reads the stored task from the
    market (MOTS_MARKET_INTERNAL_URL): its SuperNodes hold folders cut for it, the run config
    carries its definition to the ServerApp and the ClientApps (no task file on any of them), and
    the model file it publishes is the stored task's, its ε what the platform measures again."""
    from mots.local.launcher import Stack
    from mots.tasks.training import evaluate_model_file
    from services.orchestration.core.config import Settings
    from services.orchestration.trainer import Trainer

    path, content = _stored_copy(tmp_path)
    stack = Stack(workdir=tmp_path / "stack", redis_url=redis_url)
    stack.start(timeout_s=120, services=("market",))
    try:
        with httpx.Client(base_url=stack.url("market"), timeout=30) as market:
            stored = market.post("/v1/tasks", json={"content": content}, headers=OPERATOR)
            assert stored.status_code == 201, stored.text
        settings = Settings(
            trainer="deployment",
            federation_dir=str(tmp_path / "fed"),
            artifact_dir=str(tmp_path / "art"),
            superlink_port=0,
            market_internal_url=stack.url("market"),
            operator_token=stack.operator_token,
        )
        trainer = Trainer(settings)
        try:
            sizes = [float(t["data_size"]) for t in TYPES]
            result = trainer.train([1, 1], sizes, [0, 0, 0, 1, 1], 7, task=NAME)
        finally:
            trainer.stop()
    finally:
        stack.stop()
    assert result.metadata["engine"] == "deployment", result.metadata
    assert [p["status"] for p in result.participants] == ["verified", "verified"]
    meta = file_metadata(result.artifact_path)["metadata"]
    assert meta["task"] == {"name": NAME, "version": 1}
    eps, _ = evaluate_model_file(load_task(path), result.artifact_path)
    assert abs(eps - result.epsilon) < 1e-5
