"""`mots tasks …` and the SDK's task calls against the real market served over HTTP (issue 36):
the operator creates tasks from the shipped files (a scenario file sent inline), a client lists
and reads them, a version not above the stored one is the market's one-line 409, a malformed
file is refused before any request with every problem listed, and retiring marks the task."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
from click.testing import CliRunner

from mots.cli.main import cli
from mots.client import MarketClient
from mots.tasks.task_file import SHIPPED_DIR
from tests.edge.agent.test_agent_against_market import (  # the market over uvicorn
    OPERATOR_TOKEN,
    Market,
    market,  # noqa: F401 (the fixture)
)


def _mots(m: Market, tmp_path: Path, *args: str, token: str | None = None) -> tuple[int, str]:
    env = {
        "MOTS_MARKET_URL": m.url,
        "MOTS_OPERATOR_TOKEN": None if token else OPERATOR_TOKEN,
        "MOTS_TOKEN": token,
        "MOTS_PROFILE": None,
        "MOTS_WORKDIR": str(tmp_path),
        "MOTS_PROFILES": str(tmp_path / "profiles.toml"),
    }
    result = CliRunner().invoke(cli, list(args), env=env)
    return result.exit_code, result.output


def test_tasks_over_the_cli_and_the_sdk(market: Market, tmp_path: Path) -> None:  # noqa: F811
    """create (twice: 409), ls and show as a client, show --versions, a bad file, retire."""
    code, out = _mots(market, tmp_path, "tasks", "create", str(SHIPPED_DIR / "fashion-mnist.yaml"))
    assert code == 0, out
    assert out.startswith("task fashion-mnist version 1 (active): logistic"), out
    code, out = _mots(
        market, tmp_path, "tasks", "create", str(SHIPPED_DIR / "digits.yaml"), "--json"
    )
    assert code == 0 and json.loads(out)["spec"]["model"]["architecture"] == "mlp", out
    code, out = _mots(market, tmp_path, "tasks", "create", str(SHIPPED_DIR / "digits.yaml"))
    assert code == 1 and out.strip().splitlines()[-1].startswith("Error: 409: version: "), out

    registered = httpx.post(
        market.url + "/v1/clients",
        json={"name": "pi", "enrolment_code": market.enrol("type-1", 50, "0.5")},
        timeout=10,
    ).json()
    token = registered["token"]
    code, out = _mots(market, tmp_path, "tasks", "ls", "--json", token=token)
    assert code == 0, out
    assert [(t["name"], t["version"]) for t in json.loads(out)] == [
        ("fashion-mnist", 1),
        ("digits", 1),
    ]
    code, out = _mots(market, tmp_path, "tasks", "show", "fashion-mnist", token=token)
    assert code == 0 and "error_model:" in out and "../scenarios" not in out, out
    code, out = _mots(market, tmp_path, "tasks", "show", "digits", "--versions", token=token)
    assert code == 0 and out.strip() == (
        "task digits version 1 (active): mlp; Recognise hand-written digits from 8x8 scans."
    )

    bad = tmp_path / "bad.yaml"
    bad.write_text("name: Bad!\nversion: 0\n", encoding="utf-8")
    code, out = _mots(market, tmp_path, "tasks", "create", str(bad))
    assert code == 2 and "name:" in out and "version:" in out and "rounds:" in out, out

    code, out = _mots(market, tmp_path, "tasks", "retire", "digits")
    assert code == 0 and "(retired)" in out, out
    sdk = MarketClient(market.url, token)
    found: list[Any] = sdk.tasks()
    assert {(t.name, t.status) for t in found} == {
        ("fashion-mnist", "active"),
        ("digits", "retired"),
    }
    assert sdk.task("digits", 1).content == (SHIPPED_DIR / "digits.yaml").read_text()
