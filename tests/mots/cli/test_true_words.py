"""Issue 40 item 6, "true words": `mots market` against a real market (its API and worker
started by :class:`~mots.local.launcher.Stack` on SQLite and Redis) says what happened: one
enrolment use is "1 use", a replayed deposit says it is a replay and books nothing, and
`accounts` leaves out the 16 empty payment shards of each round's pool."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from mots.cli.main import cli
from mots.local.launcher import Stack
from mots.platform.db import in_transaction, make_engine, make_sessionmaker
from services.market import rounds
from tests.services.market.conftest import open_round_payload

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def market_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """A real market (API and worker) on a fresh SQLite file; yields the CLI's environment as
    the operator, with the market's database URL under ``DB`` (for opening a round)."""
    work = tmp_path_factory.mktemp("true-words")
    stack = Stack(workdir=work)
    stack.start(timeout_s=120, services=("market",))
    try:
        yield {
            "MOTS_MARKET_URL": stack.url("market"),
            "MOTS_OPERATOR_TOKEN": stack.operator_token,
            "MOTS_WORKDIR": str(work / "cli"),
            "MOTS_PROFILES": str(work / "profiles.toml"),
            "MOTS_ORCHESTRATION_URL": "",
            "MOTS_TOKEN": "",
            "MOTS_PROFILE": "",
            "DB": stack.env("market")["MOTS_DATABASE_URL"],
        }
    finally:
        stack.stop()


def _mots(env: dict[str, str], *args: str) -> Result:
    clean = {k: (v or None) for k, v in env.items() if k != "DB"}
    return CliRunner().invoke(cli, list(args), env=clean)


def _ok(env: dict[str, str], *args: str) -> str:
    result = _mots(env, *args)
    assert result.exit_code == 0, f"mots {' '.join(args)}: {result.output}"
    return result.stdout


def _client(env: dict[str, str], name: str) -> int:
    out = json.loads(
        _ok(env, "market", "register", "--name", name, "--type", "small", "--data-size", "50",
            "--cost", "0.5", "--json")
    )  # fmt: skip
    return int(out["id"])


def test_one_enrolment_use_is_one_use(market_env: dict[str, str]) -> None:
    """`--uses 1` prints "1 use", `--uses 2` "2 uses" (not "1 uses")."""
    one = _ok(market_env, "market", "enrol", "--type", "small", "--data-size", "50",
              "--cost", "0.5", "--uses", "1")  # fmt: skip
    two = _ok(market_env, "market", "enrol", "--type", "small", "--data-size", "50",
              "--cost", "0.5", "--uses", "2")  # fmt: skip
    assert ", 1 use, expires" in one and "1 uses" not in one, one
    assert ", 2 uses, expires" in two, two


def test_a_replayed_deposit_says_it_is_a_replay(market_env: dict[str, str]) -> None:
    """The same key twice: the first books, the second says it replays the first (text and
    JSON), and the wallet moved once."""
    cid = _client(market_env, "replayed")
    key = ["--idempotency-key", "t40-replay-0001"]
    first = _ok(market_env, "market", "deposit", str(cid), "10", *key)
    assert first.startswith(f"deposit 10.000000 to client {cid}: balance 10.000000"), first
    again = _ok(market_env, "market", "deposit", str(cid), "10", *key)
    assert again.startswith("replay of key t40-replay-0001:"), again
    assert "nothing booked now" in again
    shown = json.loads(_ok(market_env, "market", "deposit", str(cid), "10", *key, "--json"))
    assert shown["replayed"] is True and shown["balance"] == "10.000000"
    fresh = json.loads(_ok(market_env, "market", "deposit", str(cid), "1", "--json"))
    assert fresh["replayed"] is False and fresh["balance"] == "11.000000"


def test_accounts_leave_out_the_empty_pool_shards(market_env: dict[str, str]) -> None:
    """A round opened at the market has a pool and 16 payment shards; `accounts` shows the pool
    and says how many empty shards it left out; `--all` lists them."""
    engine = make_engine(market_env["DB"])
    try:
        payload = open_round_payload(round_id=7, rewards={"small": "0.5"})
        in_transaction(make_sessionmaker(engine), lambda s: rounds.open_round(s, payload))
    finally:
        engine.dispose()
    text = _ok(market_env, "market", "accounts")
    assert any(line.split()[:1] == ["round:7:pool"] for line in text.splitlines()), text
    assert "round:7:pool:" not in text, text
    assert "(16 empty pool shard accounts left out; --all shows them)" in text
    listed = json.loads(_ok(market_env, "market", "accounts", "--json"))
    assert not [a for a in listed if a["name"].startswith("round:7:pool:")]
    every = json.loads(_ok(market_env, "market", "accounts", "--all", "--json"))
    assert len([a for a in every if a["name"].startswith("round:7:pool:")]) == 16


def test_docs_use_the_words_the_commands_print(tmp_path: Path) -> None:
    """The README's quote example shows a deadline as `in N s`, as `mots market quote` prints."""
    readme = (Path(__file__).parents[3] / "README.md").read_text()
    assert "s from now)" not in readme
