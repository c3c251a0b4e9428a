"""The launcher's side of a run: following progress.jsonl and reading result.json."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mots.training import flower_messages as fm
from mots.training.config import TrainConfig
from mots.training.deployment import DeploymentError, app_dir, follow
from mots.training.progress import RoundProgress


def test_follow_reports_complete_lines_then_returns(tmp_path: Path) -> None:
    """Partial (clients done) and round lines are reported; a half-written line waits."""
    lines = [
        {
            "round": 0,
            "rounds": 2,
            "clients": 2,
            "clients_done": 1,
            "epsilon": float("nan"),
            "seconds": 1.0,
            "partial": True,
        },
        {"round": 0, "rounds": 2, "clients": 2, "clients_done": 2, "epsilon": 0.9, "seconds": 2.0},
    ]
    (tmp_path / "progress.jsonl").write_text(
        "".join(json.dumps(x) + "\n" for x in lines) + '{"round": 1, "ro'
    )
    (tmp_path / "result.json").write_text(json.dumps({"epsilon": 0.8}))
    seen: list[RoundProgress] = []
    assert follow(tmp_path, 2, seen.append, timeout=5)["epsilon"] == 0.8
    assert [(p.round, p.clients_done, p.partial) for p in seen] == [(0, 1, True), (0, 2, False)]


def test_follow_raises_server_error_and_finished_without_result(tmp_path: Path) -> None:
    """A ServerApp error in result.json, or a run Flower calls finished with no result, fails."""
    (tmp_path / "result.json").write_text(json.dumps({"error": "RunFailedError: nodes missing"}))
    with pytest.raises(DeploymentError, match="nodes missing"):
        follow(tmp_path, 1, None, timeout=5)
    other = tmp_path / "b"
    other.mkdir()
    with pytest.raises(DeploymentError, match="finished:failed without a result"):
        follow(other, 1, None, timeout=30, status=lambda: "finished:failed", status_every=0.1)
    with pytest.raises(DeploymentError, match="did not finish within"):
        follow(other, 1, None, timeout=0.5)


def test_run_config_roundtrip() -> None:
    """What the launcher writes (TOML) is what the ServerApp reads back; the app is found."""
    import tomllib

    cfg = TrainConfig(rounds=7, lr=0.25, test_subset=100)
    values = fm.run_config(cfg, [1, 0, 2], "/tmp/x", noop=True)
    parsed = tomllib.loads(fm.to_toml(values))
    assert fm.train_config_from_run(parsed) == cfg
    assert fm.participants_from_run(parsed) == [1, 0, 2] and parsed["noop"] is True
    app = tomllib.loads((app_dir() / "pyproject.toml").read_text())["tool"]["flwr"]["app"]
    assert set(values) <= set(app["config"]) and app["components"]["serverapp"] == "server_app:app"


def test_app_dir_defaults_to_the_installed_flower_app(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without MOTS_SERVER_APP_DIR the app is the installed edge.flower_app package's directory."""
    import edge.flower_app

    monkeypatch.delenv("MOTS_SERVER_APP_DIR", raising=False)
    assert app_dir() == Path(edge.flower_app.__file__).parent
    assert (app_dir() / "server_app.py").is_file()


def test_app_dir_comes_from_the_setting(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """MOTS_SERVER_APP_DIR moves the app; a directory without pyproject.toml is refused by name."""
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "pyproject.toml").write_text("[tool.flwr.app]\n")
    monkeypatch.setenv("MOTS_SERVER_APP_DIR", str(tmp_path / "app"))
    assert app_dir() == tmp_path / "app"
    monkeypatch.setenv("MOTS_SERVER_APP_DIR", str(tmp_path))
    with pytest.raises(DeploymentError, match="MOTS_SERVER_APP_DIR"):
        app_dir()


def _result(**extra: object) -> dict[str, object]:
    base: dict[str, object] = {
        "epsilon": 0.8,
        "accuracy": 0.7,
        "losses": [1.0, 0.8],
        "round_seconds": [2.0, 2.0],
        "artifact_path": "/x/round-0002.pt",
        "artifact_sha256": "ab",
        "completed_participants": [1, 0, 1],
        "participant_status": [{"node_id": 5, "status": "verified"}],
        "quality_gate": {"passed": True, "reason": "published"},
        "published": True,
        "flwr_run_id": 3,
        "nodes": [],
        "train_seconds_max": [0.1, 0.1],
        "discover_seconds": 0.5,
        "wall_seconds": 9.0,
        "run_dir": "/x",
    }
    return {**base, **extra}


def test_training_result_reports_the_verified_participants() -> None:
    """completed_participants is what the ServerApp verified, not the coalition asked for."""
    from mots.training.deployment import training_result

    res = training_result(_result(), (2, 0, 1), TrainConfig())
    assert res.metadata["participants"] == [2, 0, 1]
    assert res.metadata["completed_participants"] == [1, 0, 1]
    assert res.metadata["participant_status"][0]["status"] == "verified"
    assert res.epsilon == 0.8 and res.metadata["published"] is True


def test_a_model_the_quality_gate_refuses_raises_with_the_record() -> None:
    """published false: QualityGateError (a DeploymentError) carrying the run's record."""
    from mots.training.deployment import QualityGateError, training_result

    data = _result(
        published=False,
        artifact_path=None,
        quality_gate={"passed": False, "reason": "the final model is not finite (ε = nan)"},
    )
    with pytest.raises(QualityGateError, match="not finite") as err:
        training_result(data, (1, 0, 1), TrainConfig())
    assert isinstance(err.value, DeploymentError) and err.value.result["published"] is False
