"""Issue 40 item 3: one error contract for every command. With ``--json`` every error is one JSON
line on stderr with a stable ``code``, the method, path and request id where there was a request,
and the exit status docs/errors.md gives per code; the services log each refusal with its id at
their default level, where `mots platform logs --request ID` finds it.

Against a real market and orchestration (APIs and workers started by
:class:`~mots.local.launcher.Stack` on SQLite and Redis, with no pricing service: a round opened
there cannot be priced, so it never publishes)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from mots.cli.errors import EXIT_CODES, exit_code_of
from mots.cli.main import cli
from mots.local.launcher import Stack

pytestmark = pytest.mark.integration
UNREACHABLE_URL = "http://127.0.0.1:9"  # the discard port: nothing listens


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """The market and the orchestration, each an API and a worker."""
    s = Stack(workdir=tmp_path_factory.mktemp("contract"))
    s.start(timeout_s=180, services=("market", "orchestration"))
    try:
        yield s
    finally:
        s.stop()


def _env(stack: Stack | None, tmp_path: Path, **more: str | None) -> dict[str, str | None]:
    env: dict[str, str | None] = {
        "MOTS_MARKET_URL": None if stack is None else stack.url("market"),
        "MOTS_ORCHESTRATION_URL": None if stack is None else stack.url("orchestration"),
        "MOTS_OPERATOR_TOKEN": None if stack is None else stack.operator_token,
        "MOTS_TOKEN": None,
        "MOTS_PROFILE": None,
        "MOTS_WORKDIR": str(tmp_path / "cli"),
        "MOTS_PROFILES": str(tmp_path / "profiles.toml"),
    }
    return {**env, **more}


def _error(result: Result) -> dict[str, object]:
    """The one JSON error line on stderr (nothing else there but the idempotency hint)."""
    lines = [ln for ln in result.stderr.splitlines() if not ln.startswith("Idempotency-Key ")]
    assert len(lines) == 1, result.stderr
    body = json.loads(lines[0])["error"]
    assert isinstance(body, dict)
    assert set(body) == {
        "code", "kind", "message", "exit_code", "status", "method", "path", "request_id"
    }  # fmt: skip
    assert isinstance(body["code"], str) and body["code"]
    assert body["exit_code"] == result.exit_code == exit_code_of(body["code"]), body
    return body


def _run(env: dict[str, str | None], *args: str) -> dict[str, object]:
    return _error(CliRunner().invoke(cli, list(args), env=env))


USAGE = [  # one per command group: a bad value or an unknown option, exit 2 before any request
    ("market", "deposit", "1", "ten", "--json"),
    ("rounds", "show", "0", "--json"),
    ("platform", "logs", "--lines", "-1", "--json"),
    ("solve", "no-such-file.yaml", "--json"),
    ("train", "--rounds", "zero", "--json"),
    ("federation", "--no-such-option", "--json"),
    ("reproduce", "--no-such-option", "--json"),
]


@pytest.mark.parametrize("args", USAGE, ids=lambda a: " ".join(a[:2]))
def test_a_usage_error_is_one_json_line_exit_2(tmp_path: Path, args: tuple[str, ...]) -> None:
    """Every group: click's own refusal of the command line is the JSON line, code usage."""
    body = _run(_env(None, tmp_path), *args)
    assert body["code"] == "usage" and body["exit_code"] == 2
    assert body["method"] is None and body["request_id"] is None


def test_configuration_and_money_limits_are_usage_errors_in_the_users_units(
    tmp_path: Path,
) -> None:
    """No market URL: code configuration; 1e30 is refused naming the limit as typed (no
    Decimal repr) and with no retry hint for `1E+30` (nothing was sent)."""
    body = _run(_env(None, tmp_path), "market", "balance", "--json")
    assert body["code"] == "configuration" and "market_url: not configured" in str(body["message"])
    env = _env(None, tmp_path, MOTS_MARKET_URL=UNREACHABLE_URL, MOTS_OPERATOR_TOKEN="o")
    result = CliRunner().invoke(cli, ["market", "deposit", "3", "1e30", "--json"], env=env)
    body = _error(result)
    assert body["code"] == "usage", body
    assert "amount: Input should be less than or equal to 1000000000" in str(body["message"])
    assert "Decimal(" not in result.stderr and "1E+30" not in result.stderr


def test_unreachable_names_the_call_exit_3(tmp_path: Path) -> None:
    """No service answers: code unreachable, the method and path, no request id; text mode is
    one line too."""
    env = _env(None, tmp_path, MOTS_MARKET_URL=UNREACHABLE_URL, MOTS_TOKEN="t")
    body = _run(env, "market", "balance", "--json")
    assert body["code"] == "unreachable" and body["exit_code"] == 3
    assert (body["method"], body["path"], body["request_id"]) == ("GET", "/v1/me/balance", None)
    env = _env(None, tmp_path, MOTS_ORCHESTRATION_URL=UNREACHABLE_URL, MOTS_TOKEN="t")
    body = _run(env, "rounds", "ls", "--json")
    assert body["code"] == "unreachable" and body["path"] == "/v1/rounds"
    text = CliRunner().invoke(cli, ["market", "balance"], env=_env(None, tmp_path, **{
        "MOTS_MARKET_URL": UNREACHABLE_URL, "MOTS_TOKEN": "t"}))  # fmt: skip
    assert text.exit_code == 3 and text.stderr.startswith("Error: unreachable: ")


def test_refusals_carry_the_services_code_and_request_id_which_the_logs_find(
    stack: Stack, tmp_path: Path
) -> None:
    """A bad token at the market (401 token-invalid) and a missing round at the orchestration
    (404 not-found, `rounds show` as `rounds watch`): exit 1, the problem's code, method, path
    and request id; the service logged the id at its default level, and `mots platform logs
    --request ID` finds it."""
    env = _env(stack, tmp_path, MOTS_TOKEN="not-a-token")
    body = _run(env, "market", "balance", "--json")
    assert (body["code"], body["status"], body["exit_code"]) == ("token-invalid", 401, 1)
    assert (body["method"], body["path"]) == ("GET", "/v1/me/balance")
    rid = str(body["request_id"])
    assert re.fullmatch(r"[0-9a-f]{32}", rid), body
    for command in ("show", "watch"):
        body = _run(_env(stack, tmp_path), "rounds", command, "99", "--json")
        assert (body["code"], body["status"], body["exit_code"]) == ("not-found", 404, 1), body
        assert (body["method"], body["path"]) == ("GET", "/v1/rounds/99")
        assert body["request_id"]
    logs = CliRunner().invoke(
        cli, ["platform", "logs", "--workdir", str(stack.workdir), "--request", rid]
    )
    assert logs.exit_code == 0, logs.output
    assert f"GET /v1/me/balance -> 401 request_id={rid}" in logs.stdout
    assert logs.stdout.startswith("market-api: ")
    missing = CliRunner().invoke(
        cli, ["platform", "logs", "--workdir", str(stack.workdir), "--request", "nope"]
    )
    assert missing.exit_code == 1 and "request_id: no log line names request nope" in (
        missing.stderr
    )


def test_rounds_watch_fails_unless_the_round_publishes(stack: Stack, tmp_path: Path) -> None:
    """A round with no client to price is settled by rule at once: `watch` exits 5,
    round-not-published (its update lines first). A round with a client waits for the pricing
    service, which is not running: `watch --timeout 1` exits 4, timeout."""
    env = _env(stack, tmp_path)

    def opened(*args: str) -> str:
        result = CliRunner().invoke(cli, ["rounds", "open", *args, "--json"], env=env)
        assert result.exit_code == 0, result.output
        return str(json.loads(result.stdout)["round_id"])

    empty = opened()
    result = CliRunner().invoke(
        cli, ["rounds", "watch", empty, "--timeout", "120", "--json"], env=env
    )
    body = _error(result)
    assert body["code"] == "round-not-published" and result.exit_code == 5, body
    assert "nothing to price" in str(body["message"])
    assert json.loads(result.stdout.splitlines()[-1])["state"] == "settled_by_rule"
    text = CliRunner().invoke(cli, ["rounds", "watch", empty], env=env)
    assert text.exit_code == 5 and "Error: round " in text.stderr, text.output
    registered = CliRunner().invoke(
        cli, ["market", "register", "--name", "w", "--type", "small", "--data-size", "50",
              "--cost", "0.5"], env=env)  # fmt: skip
    assert registered.exit_code == 0, registered.output
    waiting = opened("--collect-seconds", "120")
    early = _run(env, "rounds", "watch", waiting, "--timeout", "1", "--poll", "0.2", "--json")
    assert early["code"] == "timeout" and early["exit_code"] == 4, early
    assert early["path"] is None  # a wait ran out, not a request


def test_every_code_of_the_cli_is_in_docs_errors_md() -> None:
    """docs/errors.md gives each CLI code with its exit status (the table is the contract)."""
    text = (Path(__file__).parents[3] / "docs" / "errors.md").read_text()
    for code, status in EXIT_CODES.items():
        assert f"| `{code}` | {status} |" in text, code


def test_the_json_example_in_docs_errors_md_has_the_shape_the_cli_prints() -> None:
    """The JSON error example of docs/errors.md's CLI section has exactly the keys every error
    line has (checked against the real commands above), and its exit status for its code
    (tests/mots/cli/test_doc_examples.py runs it as written)."""
    text = (Path(__file__).parents[3] / "docs" / "errors.md").read_text()
    section = text.split("## The CLI's errors and exit statuses", 1)[1]
    line = next(x for x in section.splitlines() if x.startswith('{"error": '))
    example = json.loads(line)["error"]
    assert set(example) == {
        "code", "kind", "message", "exit_code", "status", "method", "path", "request_id"
    }  # fmt: skip
    assert example["exit_code"] == exit_code_of(example["code"])
    assert "mots market renew" not in text and "--log-level info" not in text
