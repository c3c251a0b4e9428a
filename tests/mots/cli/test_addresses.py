"""Issue 40, item 2, against a real platform (`mots platform up --detach --free-ports`): addresses
that stay. A second `up` on a running folder says it runs (exit 0); a profile saved with only the
market's URL lists rounds (the market names the round API at GET /v1/platform); `mots profile`
reads and edits profiles; an unreachable or wrong URL's error names the URL, where it came from
and what answered; after `down` and `up --free-ports` the URLs are the same and the profile
still works."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner, Result

from mots.cli.main import cli
from mots.local.launcher import free_port
from tests.mots.cli.test_journeys import CLEAN_ENV
from tests.services.orchestration.conftest import stack_env

pytestmark = pytest.mark.integration


def _mots(*args: str, **env: str | None) -> Result:
    return CliRunner().invoke(cli, list(args), env={**CLEAN_ENV, **env})


def _up(work: Path) -> dict[str, str]:
    env = {**stack_env(), "MOTS_OPERATOR_TOKEN": None}
    up = _mots(
        "platform", "up", "--detach", "--free-ports", "--no-prometheus", "--workdir", str(work),
        **env,
    )  # fmt: skip
    assert up.exit_code == 0, up.output
    endpoints: dict[str, str] = json.loads((work / "endpoints.json").read_text())
    return endpoints


def test_addresses_stay_and_a_profile_needs_one_url(tmp_path: Path) -> None:
    work, nowhere = tmp_path / "platform", tmp_path / "no-platform"
    nowhere.mkdir()
    profiles = {"MOTS_PROFILES": str(tmp_path / "profiles.toml"), "MOTS_WORKDIR": str(nowhere)}
    operator = {"MOTS_WORKDIR": str(work)}
    try:
        first = _up(work)
        again = _mots("platform", "up", "--detach", "--free-ports", "--workdir", str(work))
        assert again.exit_code == 0, again.output
        assert "already running" in again.output and first["market"] in again.output

        market = first["market"]
        assert (
            httpx.get(f"{market}/v1/platform").json()["orchestration_url"] == first["orchestration"]
        )
        code = json.loads(
            _mots(
                "market",
                "enrol",
                "--type",
                "type-1",
                "--data-size",
                "50",
                "--cost",
                "0.5",
                "--json",
                **operator,
            ).stdout
        )["code"]
        saved = _mots(
            "market", "register", "--name", "alice", "--code", code, "--save-as", "alice",
            "--market-url", market, **profiles,
        )  # fmt: skip
        assert saved.exit_code == 0 and "saved as profile alice" in saved.output, saved.output
        as_alice = {**profiles, "MOTS_PROFILE": "alice"}
        listed = _mots("rounds", "ls", **as_alice)  # the round API's URL, from the market
        assert listed.exit_code == 0, listed.output

        shown = _mots("profile", "show", "alice", "--json", **profiles)
        assert shown.exit_code == 0, shown.output
        table = json.loads(shown.output)
        assert table["market_url"] == market and "orchestration_url" not in table
        assert table["token"].endswith("(hidden)")
        assert "alice" in _mots("profile", "ls", **profiles).output

        # a URL with /v1, the pricing service's URL, and a port nobody serves: each named
        v1 = _mots("market", "me", "--market-url", f"{market}/v1", **as_alice)
        assert v1.exit_code == 2 and "without /v1" in v1.output and "flag" in v1.output, v1.output
        wrong = _mots("market", "me", "--market-url", first["pricing"], **as_alice)
        assert wrong.exit_code == 1, wrong.output
        assert f"{first['pricing']} (market_url from the flag) is the pricing service" in (
            wrong.output
        )
        dead = f"http://127.0.0.1:{free_port()}"
        moved = _mots("profile", "set", "alice", f"market_url={dead}", **profiles)
        assert moved.exit_code == 0, moved.output
        refused = _mots("market", "me", **as_alice)
        assert refused.exit_code != 0
        assert f"{dead} (market_url from profile alice)" in refused.output, refused.output
        bad = _mots("profile", "set", "alice", f"market_url={market}/v1/", **profiles)
        assert bad.exit_code == 2 and "without /v1" in bad.output, bad.output
        assert _mots("profile", "set", "alice", f"market_url={market}", **profiles).exit_code == 0

        down = _mots("platform", "down", "--workdir", str(work))
        assert down.exit_code == 0, down.output
        second = _up(work)  # the same ports: they were kept and are free
        for name in ("market", "pricing", "orchestration"):
            assert second[name] == first[name], (name, first, second)
        me = _mots("market", "me", "--json", **as_alice)
        assert me.exit_code == 0 and json.loads(me.output)["name"] == "alice", me.output
        assert _mots("rounds", "ls", **as_alice).exit_code == 0

        removed = _mots("profile", "rm", "alice", **profiles)
        assert removed.exit_code == 0 and "removed profile alice" in removed.output
        gone = _mots("profile", "rm", "alice", **profiles)
        assert gone.exit_code == 0 and "nothing to remove" in gone.output
    finally:
        down = _mots("platform", "down", "--workdir", str(work))
        assert down.exit_code == 0, down.output
