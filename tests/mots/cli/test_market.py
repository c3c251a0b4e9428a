"""`mots market` without services: settings, usage errors (exit 2) and an unreachable market
(exit 3, one line; issue 40). The commands against real services: tests/mots/cli/test_journeys.py."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from mots.cli.main import cli

NO_ENV = dict.fromkeys(
    (
        "MOTS_MARKET_URL",
        "MOTS_ORCHESTRATION_URL",
        "MOTS_TOKEN",
        "MOTS_OPERATOR_TOKEN",
        "MOTS_PROFILE",
    )
)


def _run(tmp_path: Path, *args: str, **env: str) -> tuple[int, str]:
    base = {**NO_ENV, "MOTS_WORKDIR": str(tmp_path), "MOTS_PROFILES": str(tmp_path / "p.toml")}
    result = CliRunner().invoke(cli, list(args), env={**base, **env})
    return result.exit_code, result.output


def test_config_shows_each_setting_and_its_source_with_tokens_masked(tmp_path: Path) -> None:
    """Flags and environment meet in `mots market config --json`; tokens show 4 characters."""
    code, out = _run(
        tmp_path, "market", "config", "--json", "--market-url", "http://m:1",
        MOTS_TOKEN="secret-token",
    )  # fmt: skip
    assert code == 0, out
    shown = json.loads(out)
    assert shown["settings"] == {
        "market_url": "http://m:1",
        "orchestration_url": None,
        "token": "secr…",
        "operator_token": None,
    }
    assert shown["sources"] == {"market_url": "flag", "token": "env MOTS_TOKEN"}


def test_usage_errors_exit_2_and_an_unreachable_market_exits_3(tmp_path: Path) -> None:
    """A missing setting, a bad amount or a bad strategy exit 2; no market answering is one
    line naming the call (exit 3)."""
    code, out = _run(tmp_path, "market", "balance")
    assert code == 2 and "market_url: not configured" in out
    code, out = _run(tmp_path, "market", "deposit", "1", "ten", "--market-url", "http://m")
    assert code == 2 and "'ten' is not a decimal amount" in out
    code, out = _run(tmp_path, "market", "declare", "1", "sell")
    assert code == 2 and "'sell' is not one of" in out
    code, out = _run(tmp_path, "market", "register", "--name", "x", "--market-url", "http://m")
    assert code == 2 and "without --code, give --type, --data-size and --cost" in out
    code, out = _run(
        tmp_path, "market", "register", "--name", "x", "--type", "a b", "--data-size", "0",
        "--cost", "1", "--market-url", "http://m",
    )  # fmt: skip
    assert code == 2 and "type_name: String should match pattern" in out
    assert "data_size: Input should be greater than or equal to 1" in out
    code, out = _run(
        tmp_path, "market", "deposit", "1", "0", "--market-url", "http://m", MOTS_OPERATOR_TOKEN="o"
    )
    assert code == 2 and "amount: Input should be greater than 0" in out
    code, out = _run(
        tmp_path, "market", "balance", "--market-url", "http://127.0.0.1:9", MOTS_TOKEN="t"
    )
    assert code == 3 and out.startswith("Error: unreachable: ") and "GET /v1/me/balance" in out
    assert len(out.strip().splitlines()) == 1


def test_a_url_without_a_scheme_is_one_line_not_a_traceback(tmp_path: Path) -> None:
    """Issue 26: `--market-url 127.0.0.1:8101` is a usage error naming the rule (exit 2)."""
    code, out = _run(tmp_path, "market", "quote", "--market-url", "127.0.0.1:8101", "--token", "t")
    assert code == 2 and "Traceback" not in out
    assert "market_url: must start with http:// or https://" in out


def test_json_errors_are_json_on_stderr(tmp_path: Path) -> None:
    """Under --json a refusal or a usage error is one JSON line on stderr, same exit status."""
    base = {**NO_ENV, "MOTS_WORKDIR": str(tmp_path), "MOTS_PROFILES": str(tmp_path / "p.toml")}
    runner = CliRunner()
    for args, code, kind in (
        (["--market-url", "http://127.0.0.1:1", "--token", "t"], 3, "unreachable"),
        (["--market-url", "127.0.0.1:1", "--token", "t"], 2, "configuration"),
        ([], 2, "configuration"),
    ):
        result = runner.invoke(cli, ["market", "quote", *args, "--json"], env=base)
        assert result.exit_code == code, result.output
        assert result.stdout == ""
        error = json.loads(result.stderr.strip())["error"]
        assert (error["kind"], error["exit_code"]) == (kind, code)
