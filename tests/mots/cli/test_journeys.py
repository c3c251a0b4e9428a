"""The README's buyer and participant journeys with `mots market` / `mots rounds` alone, against
real services started by `mots platform up --workdir` from another folder (real Redis, Celery
workers, SQLite, the in-process trainer), stopped by `mots platform down --workdir`."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import tomllib
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner, Result

from mots.cli.main import cli
from mots.client.model_file import sha256_file
from tests.examples.torch_only import run_classify, torch_only_python
from tests.services.orchestration.conftest import TYPES, stack_env

pytestmark = pytest.mark.integration
MOTS = str(Path(sys.executable).with_name("mots"))
CLEAN_ENV = dict.fromkeys(
    (
        "MOTS_MARKET_URL",
        "MOTS_ORCHESTRATION_URL",
        "MOTS_TOKEN",
        "MOTS_OPERATOR_TOKEN",
        "MOTS_PROFILE",
        "MOTS_PROFILES",
    )
)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """`mots platform up --workdir W --free-ports` started from an unrelated folder; yields W
    once W/endpoints.json exists; `mots platform down --workdir W` stops it."""
    base = tmp_path_factory.mktemp("journeys")
    work, elsewhere = base / "platform", base / "elsewhere"
    elsewhere.mkdir()
    env = {**os.environ, **stack_env()}
    env.pop("MOTS_OPERATOR_TOKEN", None)
    log = (base / "up.log").open("wb")
    up = subprocess.Popen(
        [MOTS, "platform", "up", "--workdir", str(work), "--free-ports", "--no-prometheus"],
        cwd=elsewhere,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 240
        while not (work / "endpoints.json").exists():
            assert up.poll() is None, (base / "up.log").read_text()
            assert time.monotonic() < deadline, (base / "up.log").read_text()
            time.sleep(0.5)
        yield work
        down = _mots("platform", "down", "--workdir", str(work))
        assert down.exit_code == 0, down.output
        again = _mots("platform", "down", "--workdir", str(work))  # twice: still exit 0
        assert again.exit_code == 0 and "no platform running" in again.output, again.output
        assert up.wait(timeout=90) == 0, (base / "up.log").read_text()
        assert not (work / "endpoints.json").exists() and not (work / "pids.json").exists()
    finally:
        if up.poll() is None:
            os.killpg(up.pid, signal.SIGTERM)
            up.wait(timeout=60)
        log.close()


def _mots(*args: str, **env: str | None) -> Result:
    """`mots ARGS` in process, with only the given MOTS_* settings in the environment."""
    return CliRunner().invoke(cli, list(args), env={**CLEAN_ENV, **env})


def _ok(*args: str, **env: str | None) -> str:
    result = _mots(*args, **env)
    assert result.exit_code == 0, f"mots {' '.join(args)}: {result.output}"
    return result.stdout


def _json(*args: str, **env: str | None) -> object:
    return json.loads(_ok(*args, "--json", **env))


def test_endpoints_file_names_every_service_and_the_operator_token(workdir: Path) -> None:
    """endpoints.json: the three APIs, Prometheus (off here: null) and the workdir's own operator
    token (generated, never a built-in one; endpoints.json and secrets.env are mode 600);
    `mots market config` reads it by default."""
    endpoints = json.loads((workdir / "endpoints.json").read_text())
    assert set(endpoints) == {
        "market", "pricing", "orchestration", "prometheus", "operator_token", "metrics"
    }  # fmt: skip
    jobs = endpoints["metrics"]  # every API's and every worker's metrics endpoint (issue 26)
    assert {"market", "pricing", "orchestration", "market-worker", "evaluation-worker"} <= set(jobs)
    assert {"orchestration-worker", "training-worker"} <= set(jobs)
    assert len(jobs) == 7  # pricing has no worker: its API alone (issue 38)
    for url in jobs.values():
        assert "# HELP" in httpx.get(url, timeout=10).text, url
    assert endpoints["prometheus"] is None
    assert endpoints["operator_token"] != "dev-operator-token"
    assert len(endpoints["operator_token"]) >= 32
    secrets_env = (workdir / "secrets.env").read_text()
    assert f"MOTS_OPERATOR_TOKEN={endpoints['operator_token']}\n" in secrets_env
    assert "dev-token-secret" not in secrets_env
    for name in ("endpoints.json", "secrets.env"):
        assert (workdir / name).stat().st_mode & 0o777 == 0o600
    pids = json.loads((workdir / "pids.json").read_text())["pids"]
    environs = [Path(f"/proc/{pid}/environ").read_bytes().split(b"\0") for pid in pids]
    assert all(b"MOTS_SUPERLINK_PORT=0" in e for e in environs)  # --free-ports: no fixed 9500
    shown = _json("market", "config", MOTS_WORKDIR=str(workdir))
    assert isinstance(shown, dict)
    assert shown["settings"]["market_url"] == endpoints["market"]
    assert shown["sources"]["market_url"] == str(workdir / "endpoints.json")


def test_buyer_and_participant_journeys(workdir: Path, tmp_path: Path) -> None:
    """Participants register, see the quote, join and download the model they trained; a buyer
    registers, is funded by the operator, buys, sees the purchase in its ledger and downloads a
    verified model whose metadata reads without torch; the ledger stays balanced."""
    w = {"MOTS_WORKDIR": str(workdir)}
    tokens: dict[str, str] = {}
    ids: dict[str, int] = {}
    for spec in TYPES:  # the operator attests each type; its clients redeem the code
        issued = _json(
            "market", "enrol", "--type", str(spec["name"]), "--data-size", str(spec["data_size"]),
            "--cost", str(spec["cost"]), "--uses", str(spec["count"]), **w,
        )  # fmt: skip
        assert isinstance(issued, dict) and issued["uses_left"] == spec["count"]
        for i in range(int(spec["count"])):
            name = f"{spec['name']}-{i}"
            me = _json("market", "register", "--name", name, "--code", issued["code"], **w)
            assert isinstance(me, dict) and me["type_name"] == spec["name"]
            tokens[name], ids[name] = me["token"], me["id"]
    buyer, participants = "type-1-0", ["type-3-0", "type-3-1"]
    profiles = {"MOTS_PROFILES": str(tmp_path / "profiles.toml")}
    saved = _ok(
        "market", "register", "--name", "late", "--type", "type-1", "--data-size", "50",
        "--cost", "0.5", "--save-as", "late", **w, **profiles,
    )  # fmt: skip
    assert "saved as profile late" in saved
    as_late = {**profiles, "MOTS_PROFILE": "late"}  # the token and the workdir from the profile
    late = _json("market", "me", **as_late)
    assert isinstance(late, dict) and late["name"] == "late"
    assert "balance 10.000000" in _ok("market", "deposit", str(ids[buyer]), "10", **w)

    opened = _json("rounds", "open", "--subsidy-budget", "100", **w)
    assert isinstance(opened, dict)
    round_id = str(opened["round_id"])
    quote = _json(
        "market", "quote", "--round", round_id, "--wait", "60", MOTS_TOKEN=tokens[buyer], **w
    )
    assert isinstance(quote, dict) and quote["state"] == "collecting"
    terms = {t["type_name"]: t for t in quote["types"]}
    assert terms["type-3"]["target_participants"] == 2 and terms["type-1"]["target_buyers"] >= 1
    for name in participants:
        _ok("market", "declare", round_id, "join", MOTS_TOKEN=tokens[name], **w)
    _ok("market", "declare", round_id, "buy", MOTS_TOKEN=tokens[buyer], **w)
    buying = _mots("market", "buy", round_id, "--json", MOTS_TOKEN=tokens[buyer], **w)
    assert buying.exit_code == 0, buying.output
    bought = json.loads(buying.stdout)
    assert isinstance(bought, dict)
    key = buying.stderr.split()[1]  # "Idempotency-Key KEY (to retry: …)"
    assert buying.stderr.startswith("Idempotency-Key ") and f"--idempotency-key {key}" in (
        buying.stderr
    )
    again = _json(
        "market", "buy", round_id, "--idempotency-key", key, MOTS_TOKEN=tokens[buyer], **w
    )
    assert again == bought  # the retry with the printed key: the stored result, nothing paid twice
    assert Decimal(bought["balance"]) == Decimal("10") - Decimal(quote["price"])
    for name in tokens.keys() - {buyer, *participants}:
        _ok("market", "declare", round_id, "abstain", MOTS_TOKEN=tokens[name], **w)
    _ok("market", "declare", round_id, "abstain", **as_late)

    watched = _ok("rounds", "watch", round_id, "--timeout", "300", "--poll", "0.2", **w)
    assert f"round {round_id}: published" in watched, watched
    assert "FedAvg 2/2: 2/2 clients" in watched
    lines = _ok("rounds", "watch", round_id, "--json", **w).splitlines()  # ended: one line
    assert len(lines) == 1 and json.loads(lines[0])["state"] == "published"
    shown = _json("rounds", "show", round_id, **w)
    assert isinstance(shown, dict) and shown["state"] == "published"
    assert shown["summary"]["participants"] == {"type-1": 0, "type-3": 2}
    listed = _json("rounds", "ls", **w)
    assert isinstance(listed, list) and listed[0]["id"] == int(round_id)

    ledger = _json("market", "balance", MOTS_TOKEN=tokens[buyer], **w)
    assert isinstance(ledger, dict)
    assert [e["kind"] for e in ledger["entries"]][:2] == ["purchase", "deposit"]
    entries = _json("market", "ledger", "--all", MOTS_TOKEN=tokens[buyer], **w)
    assert isinstance(entries, list)
    assert sum(Decimal(e["amount"]) for e in entries) == Decimal(ledger["balance"])
    for name in (buyer, participants[0]):
        dest = tmp_path / name / f"mots-round-{round_id}.pt2"
        dest.parent.mkdir()
        got = _json(
            "market", "download", round_id, "--out", str(dest), MOTS_TOKEN=tokens[name], **w
        )
        assert isinstance(got, dict) and got["sha256"] == sha256_file(dest)
        info = _json("market", "model", "info", str(dest))
        assert isinstance(info, dict)
        assert (info["round_id"], info["participants"]) == (int(round_id), [0, 2])
        assert info["sha256"] == got["sha256"] and info["epsilon"] > 0
    # the buyer with PyTorch alone: the downloaded model classifies the test set as recorded
    classified = run_classify(torch_only_python(), tmp_path / buyer / f"mots-round-{round_id}.pt2")
    assert abs(classified["accuracy"] - classified["metadata_accuracy"]) <= 0.001, classified
    assert "balanced" in _ok("market", "ledger-check", **w)

    renewed = _ok("market", "token", "renew", **as_late)  # the profile gets the new token
    assert "saved as profile late" in renewed
    left = _json("market", "leave", **as_late)
    assert isinstance(left, dict) and left["status"] == "left"

    listed = _json("market", "enrolments", **w)
    assert isinstance(listed, list) and [e["uses_left"] for e in listed] == [0, 0]
    revoked = _json("market", "revoke", str(ids["type-1-2"]), **w)
    assert isinstance(revoked, dict) and revoked["status"] == "revoked"

    outsider = _mots("market", "download", round_id, MOTS_TOKEN=tokens["type-1-1"], **w)
    assert outsider.exit_code == 1
    assert outsider.output.strip().splitlines()[-1].startswith("Error: 403: round_id:")


def test_the_operator_sees_the_money_and_each_clients_status(workdir: Path) -> None:
    """Issue 26 item 3 (after the journey): transactions across accounts, a page at a time, by
    account, round, kind and time; every account's balance, the platform's too; clients with
    their status and a status filter."""
    w = {"MOTS_WORKDIR": str(workdir)}
    every = _json("market", "transactions", "--limit", "500", **w)
    assert isinstance(every, dict) and every["next"] is None
    txs = every["items"]
    assert {"deposit", "purchase"} <= {t["kind"] for t in txs}
    assert all(sum(Decimal(e["amount"]) for e in t["entries"]) == 0 for t in txs)
    assert [t["id"] for t in txs] == sorted((t["id"] for t in txs), reverse=True)
    first = _json("market", "transactions", "--limit", "1", **w)
    assert isinstance(first, dict) and first["items"][0]["id"] == txs[0]["id"] and first["next"]
    second = _json("market", "transactions", "--limit", "1", "--cursor", first["next"], **w)
    assert isinstance(second, dict) and second["items"][0]["id"] == txs[1]["id"]
    deposits = _json("market", "transactions", "--kind", "deposit", **w)
    assert isinstance(deposits, dict) and deposits["items"]
    assert {t["kind"] for t in deposits["items"]} == {"deposit"}
    rounds = {t["round_id"] for t in txs if t["round_id"] is not None}
    for r in rounds:
        of_round = _json("market", "transactions", "--round", str(r), **w)
        assert isinstance(of_round, dict)
        assert {t["round_id"] for t in of_round["items"]} == {r}
    wallet = next(e["account"] for e in deposits["items"][0]["entries"] if "wallet" in e["account"])
    mine = _json("market", "transactions", "--account", wallet, **w)
    assert isinstance(mine, dict)
    assert all(any(e["account"] == wallet for e in t["entries"]) for t in mine["items"])
    later = _json("market", "transactions", "--since", "2999-01-01", **w)
    assert isinstance(later, dict) and later["items"] == []
    earlier = _json("market", "transactions", "--until", "2999-01-01", **w)
    assert isinstance(earlier, dict) and len(earlier["items"]) == min(len(txs), 50)
    accounts = _json("market", "accounts", **w)
    assert isinstance(accounts, list)
    names = {a["name"]: a for a in accounts}
    assert "external:deposits" in names and any(n.startswith("wallet:") for n in names)
    assert sum(Decimal(a["balance"]) for a in accounts) == 0
    listed = _ok("market", "clients", **w)
    assert listed.splitlines()[0].split()[:3] == ["id", "name", "status"]
    revoked = _json("market", "clients", "--status", "revoked", **w)
    assert isinstance(revoked, list) and revoked and {c["status"] for c in revoked} == {"revoked"}
    bad = _mots("market", "clients", "--status", "sleeping", **w)
    assert bad.exit_code == 2


def test_refusals_are_one_line_and_usage_errors_exit_2(workdir: Path, tmp_path: Path) -> None:
    """A bad token and an unknown round answer the service's detail in one line (exit 1); a
    missing setting is a usage error (exit 2) naming how to give it."""
    w = {"MOTS_WORKDIR": str(workdir)}
    bad = _mots("market", "balance", MOTS_TOKEN="not-a-token", **w)
    assert bad.exit_code == 1 and bad.output.startswith("Error: 401: "), bad.output
    assert len(bad.output.strip().splitlines()) == 1
    down = _mots("platform", "down", "--workdir", str(tmp_path))  # nothing running: exit 0
    assert down.exit_code == 0 and "no platform running" in down.output
    missing = _mots("rounds", "show", "999", **w)
    assert missing.exit_code == 1 and "round 999 does not exist" in missing.output
    unset = _mots("market", "balance", MOTS_WORKDIR=str(tmp_path))
    assert unset.exit_code == 2 and "market_url: not configured" in unset.output


OPERATOR_COMMANDS = [
    ("market", "enrol", "--type", "type-1", "--data-size", "50", "--cost", "0.5"),
    ("market", "register", "--name", "x", "--type", "type-1", "--data-size", "50", "--cost", "0.5"),
    ("market", "deposit", "1", "1000"),
    ("market", "clients"),
    ("market", "enrolments"),
    ("market", "approve", "1"),
    ("market", "revoke", "1"),
    ("market", "ledger-check"),
    ("market", "transactions"),
    ("market", "accounts"),
    ("rounds", "open"),
    ("tasks", "retire", "digits"),
]


def test_a_client_profile_never_acts_as_the_operator(workdir: Path, tmp_path: Path) -> None:
    """Issue 26: `register --save-as` keeps the URLs and the client's own token only; with that
    profile active (and the platform's workdir still exported) every operator command is refused
    in one line before any request, and nothing moves; the client's own commands act as it."""
    w = {"MOTS_WORKDIR": str(workdir)}
    profiles = tmp_path / "profiles.toml"
    issued = _json("market", "enrol", "--type", "type-1", "--data-size", "50", "--cost", "0.5", **w)
    assert isinstance(issued, dict)
    me = _json(
        "market", "register", "--name", "alice", "--code", issued["code"], "--save-as", "alice",
        **w, MOTS_PROFILES=str(profiles),
    )  # fmt: skip
    assert isinstance(me, dict)
    table = tomllib.loads(profiles.read_text())["profiles"]["alice"]
    assert set(table) == {"role", "market_url", "orchestration_url", "token"}, table
    assert table["role"] == "client" and table["token"] == me["token"]
    assert "dev-operator-token" not in profiles.read_text()
    alice = {**w, "MOTS_PROFILES": str(profiles), "MOTS_PROFILE": "alice"}
    before = _json("market", "balance", **alice)
    for args in OPERATOR_COMMANDS:
        for how in (alice, {**w, "MOTS_PROFILES": str(profiles)}):
            extra = () if "MOTS_PROFILE" in how else ("--profile", "alice")
            out = _mots(*args, *extra, **how)
            assert out.exit_code == 2, (args, out.output)
            lines = out.output.strip().splitlines()
            assert len(lines) == 1 and "is an operator command" in lines[0], out.output
            assert "profile 'alice' is a client's" in lines[0]
    assert _json("market", "balance", **alice) == before  # the deposit never happened
    mine = _json("market", "me", **alice)
    assert isinstance(mine, dict) and mine["id"] == me["id"]
    shown = _json("market", "config", **alice)
    assert isinstance(shown, dict) and shown["settings"]["operator_token"] is None
    assert shown["role"] == "client"
    # the client's view of every round (issue 25: the market owns membership, and nothing in the
    # view is private to a round's members): no type's cost or error model, no settlement, and of
    # the participants' outcomes only its own (alice was in none of them)
    rounds = _json("rounds", "ls", **alice)
    operator_rounds = _json("rounds", "ls", **w)
    assert isinstance(rounds, list) and isinstance(operator_rounds, list)
    assert [r["id"] for r in rounds] == [r["id"] for r in operator_rounds] != []
    for seen in rounds:
        assert seen["scenario"] is None
        if seen["summary"] is not None:
            assert seen["summary"]["settlement"] is None
            assert seen["summary"]["verification"] == {}
    assert any(r["scenario"] is not None for r in operator_rounds)
    # the operator, from the workdir, is no client: a client command asks for a token
    as_operator = _mots("market", "me", **w)
    assert as_operator.exit_code == 2 and "token: not configured" in as_operator.output


NOT_RUN_HERE = {
    "mots demo": "a whole market cycle with training (test_help_long_examples runs it)",
    "mots reproduce": "the paper's evaluation (test_help_long_examples runs the small line)",
    "mots sweep": "simulated FedAvg rounds per coalition (test_help_long_examples)",
    "mots train": "trains a model (test_help_long_examples)",
    "mots federation": "starts a SuperLink and SuperNodes (test_help_long_examples)",
    "mots platform up": "starts a platform: this module's fixture, test_help_long_examples",
    "mots platform down": "stops the platform: this module's fixture does, twice",
    "mots model verify": "needs the market's key saved first (test_help_long_examples says why)",
    "mots COMMAND": "a placeholder for any command",
    "export ": "a shell line: its setting applies to the lines after it",
}
"""Example lines not run against the live platform here, and where they run instead (the
long ones: tests/mots/cli/test_help_long_examples.py, which says which never run and why)."""
OPERATOR_VERBS = {cmd[:2] for cmd in OPERATOR_COMMANDS} | {("rounds", "ls"), ("rounds", "show")}
OPERATOR_VERBS |= {("rounds", "watch"), ("market", "config"), ("platform", "status")}
OPERATOR_VERBS |= {("platform", "logs")}
OPERATOR_VERBS |= {("tasks", "create")}  # reads a file first: not in OPERATOR_COMMANDS


def _examples() -> list[tuple[str, str]]:
    """Every example line of every `mots … --help`, with the command path whose help shows it."""
    import click

    def walk(cmd: click.Command, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
        yield path
        if isinstance(cmd, click.Group):
            for name, sub in sorted(cmd.commands.items()):
                yield from walk(sub, (*path, name))

    out = []
    for path in walk(cli):
        text = CliRunner().invoke(cli, [*path, "--help"], terminal_width=80).output
        block = re.search(r"^\s*Examples?(?: \(.*\))?:\n((?:[ \t]+\S.*\n?)+)", text, re.M)
        assert block, path
        for line in block.group(1).splitlines():
            out.append((" ".join(path), line.split("  #")[0].strip()))
    return out


def test_every_help_example_runs_against_the_platform(
    workdir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 26: each example line of each --help, as written (the workdir /tmp/mots, a CODE and
    the examples/ paths filled in), run against this live platform: exit 0, or the platform's own
    one-line refusal of that id in this state (exit 1, `Error: 4xx: …`). Never a usage error,
    never a traceback. Client commands run as the example's profile (alice, pi-1: registered with
    `--save-as` as the market help shows); lines that start processes for minutes are listed in
    NOT_RUN_HERE with where they run. Issue 36: the digits task is stored first (as `mots tasks
    create examples/tasks/digits.yaml` shows), so the lines that name a task run in it (a CODE
    of a line naming a task is that task's) and are never refused."""
    import shlex

    root = Path(__file__).resolve().parents[3]
    profiles = tmp_path / "profiles.toml"
    base = {"MOTS_WORKDIR": str(workdir), "MOTS_PROFILES": str(profiles)}
    monkeypatch.chdir(tmp_path)  # downloads land here

    def code(task: str = "fashion-mnist") -> str:
        size, cost = ("20", "0.2") if task == "digits" else ("50", "0.5")  # as the help's lines
        issued = _json(
            "market", "enrol", "--type", "type-1", "--data-size", size, "--cost", cost,
            "--task", task, **base,
        )  # fmt: skip
        return str(issued["code"])  # type: ignore[index]

    _ok("market", "register", "--name", "pi-1", "--code", code(), "--save-as", "pi-1", **base)
    _ok("tasks", "create", f"{root}/examples/tasks/digits.yaml", **base)
    ran, refused, profile = [], [], {}
    for where, line in _examples():
        if line.startswith("export MOTS_PROFILE="):
            profile[where] = line.split("=", 1)[1]
        if any(line.startswith(prefix) for prefix in NOT_RUN_HERE):
            continue
        line = line.replace("/tmp/mots", str(workdir)).replace("examples/", f"{root}/examples/")
        if " CODE" in line:
            task = re.search(r"--task (\S+)", line)
            line = line.replace(" CODE", f" {code(task.group(1) if task else 'fashion-mnist')}")
        args = shlex.split(line)[1:]
        env = dict(base)
        if tuple(args[:2]) not in OPERATOR_VERBS and "--profile" not in args:
            env["MOTS_PROFILE"] = profile.get(where, "alice")
        result = _mots(*args, **env)
        lines = result.output.strip().splitlines()
        assert "Traceback" not in result.output, (line, result.output)
        if result.exit_code == 0:
            ran.append(line)
            continue
        if "model info mots-round-1.pt" in line and any("download 1" in r for r, _ in refused):
            assert result.exit_code == 2 and "does not exist" in lines[-1], result.output
            refused.append((line, "no file: the download before it was refused in this state"))
            continue
        notes = [x for x in lines[:-1] if not x.startswith("Idempotency-Key ")]  # retry hint
        assert result.exit_code == 1 and lines and not notes, (where, line, result.output)
        assert re.match(r"Error: 4\d\d: ", lines[-1]), (where, line, result.output)
        refused.append((line, lines[-1]))
    assert len(ran) >= 30, (ran, refused)
    in_a_task = [line for line in ran if "--task digits" in line]
    assert {line.split()[2] for line in in_a_task} >= {"enrol", "register"}, (in_a_task, refused)
    assert not [line for line, _ in refused if "--task" in line], refused
    print(f"{len(ran)} examples ran, {len(refused)} refused in this state:")
    for line, why in refused:
        print(f"  {line}  ->  {why}")
