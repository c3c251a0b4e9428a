"""The economics CLI: the JSON contracts, the human tables, and errors that name the option and rule."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from mots.cli.main import cli

EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "scenarios"
PAPER = str(EXAMPLES / "paper_mnist.yaml")
STALL = str(EXAMPLES / "stall.yaml")


def _run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.output


def test_solve_json_contract() -> None:
    """`mots solve --json` has exactly the documented keys, lists in type order."""
    code, out = _run("solve", PAPER, "--json")
    assert code == 0, out
    doc = json.loads(out)
    assert set(doc) == {"regime", "eps_min", "optimum", "mechanism", "fl_optimum"}
    assert set(doc["optimum"]) == {"participants", "buyers", "welfare", "epsilon"}
    assert set(doc["mechanism"]) == {"price", "rewards", "tau", "L0", "lambda", "incentive_cost"}
    assert set(doc["fl_optimum"]) == {"participants", "welfare", "epsilon", "incentive_cost"}
    assert doc["regime"] == "low"
    assert doc["optimum"]["participants"] == [0, 5, 5]
    assert doc["optimum"]["buyers"] == [10, 0, 0]
    assert len(doc["mechanism"]["rewards"]) == 3
    assert doc["mechanism"]["incentive_cost"] == pytest.approx(0.0, abs=1e-9)  # Theorem 3, W* > 0
    assert doc["optimum"]["welfare"] >= doc["fl_optimum"]["welfare"]  # Proposition 3


def test_solve_budget_balance_identity() -> None:
    """At K*, buyers' payments equal rewards paid: Σ K_i r_i = Σ B_i p when W* > 0."""
    doc = json.loads(_run("solve", STALL, "--json")[1])
    k, b = doc["optimum"]["participants"], doc["optimum"]["buyers"]
    paid = sum(ki * ri for ki, ri in zip(k, doc["mechanism"]["rewards"], strict=True))
    assert paid - sum(b) * doc["mechanism"]["price"] == pytest.approx(0.0, abs=1e-9)
    assert doc["optimum"]["welfare"] == pytest.approx(5.4072, abs=1e-4)


def test_solve_human_output_and_eps_req_override() -> None:
    """The table names K*, and an infeasible --eps-req is an error stating ε_min."""
    code, out = _run("solve", PAPER)
    assert code == 0 and "K*" in out and "welfare" in out
    code, out = _run("solve", PAPER, "--eps-req", "0.5")
    assert code == 2 and "eps_min" in out and "1.16667" in out


def test_dynamics_stall_and_robust() -> None:
    """Issue 2's stall: paper SWAN stays at (1, 0); the platform's default reaches K* = (4, 4)."""
    code, out = _run("dynamics", STALL, "--start", "1,0", "--mechanism", "swan", "--json")
    assert code == 0, out
    doc = json.loads(out)
    assert set(doc) == {"final", "moves", "welfare", "converged"}
    assert doc["final"] == [1, 0] and doc["welfare"] == pytest.approx(-0.30, abs=0.01)
    doc = json.loads(_run("dynamics", STALL, "--start", "1,0", "--json")[1])
    assert doc["final"] == [4, 4] and doc["converged"] is True
    assert doc["welfare"] == pytest.approx(5.4072, abs=1e-4)


@pytest.mark.parametrize(
    ("start", "needle"),
    [("1", "one count per type"), ("1,x", "whole number"), ("9,0", "above its N_i")],
)
def test_dynamics_bad_start(start: str, needle: str) -> None:
    """Bad --start values are rejected naming the option and the rule."""
    code, out = _run("dynamics", STALL, "--start", start)
    assert code == 2 and "--start" in out and needle in out


def test_unknown_mechanism_lists_names() -> None:
    """An unknown --mechanism lists the known ones."""
    code, out = _run("dynamics", STALL, "--start", "1,0", "--mechanism", "nope")
    assert code == 2 and "swan_robust" in out


def test_effects_peak_threshold() -> None:
    """Fig. 5's dashed curve: type 1 joining (0, 0, 5) is Region IV, reversing at K1 = 3."""
    code, out = _run("effects", PAPER, "--coalition", "0,0,5", "--json")
    assert code == 0, out
    doc = json.loads(out)
    first = doc["types"][0]
    assert first["region"] == "IV" and first["reversal_at"] == 3 and first["effect"] < 0
    code, out = _run("effects", PAPER, "--coalition", "0,0,0")
    assert code == 2 and "non-empty" in out


def test_compare_and_mechanisms() -> None:
    """`mots compare` runs every mechanism; `mots mechanisms` marks the default."""
    code, out = _run("compare", STALL, "--json")
    assert code == 0, out
    rows = {r["mechanism"]: r for r in json.loads(out)}
    assert {"swan", "swan_robust", "modified_fl", "dynamic", "fl_optimum"} <= set(rows)
    assert rows["swan_robust"]["final"] == [4, 4]
    code, out = _run("mechanisms")
    assert code == 0 and "swan_robust (default)" in out


def test_bad_scenario_file_names_field(tmp_path: Path) -> None:
    """A bad scenario is a usage error naming the field and the rule."""
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "types:\n  - {name: a, count: 1, data_size: -1, cost: 0}\nerror_model: {d_gamma2: 1}\n"
    )
    code, out = _run("solve", str(bad))
    assert code == 2 and "types.0.data_size" in out


@pytest.mark.parametrize("command", ["solve", "compare", "effects"])
def test_unreadable_and_out_of_range_scenarios_are_one_line_and_exit_2(
    command: str, tmp_path: Path
) -> None:
    """A non-UTF-8 file, a missing one and 10^20 clients: ``Error: <file>: <rule>`` on one line,
    exit status 2, no traceback."""
    latin1 = tmp_path / "latin1.yaml"
    latin1.write_bytes(
        "types:\n  - {name: café, count: 2, data_size: 50, cost: 0.5}\n".encode("latin-1")
    )
    huge = tmp_path / "huge.yaml"
    huge.write_text(
        Path(PAPER).read_text(encoding="utf-8").replace("count: 10,", f"count: {10**20},"),
        encoding="utf-8",
    )
    extra = ["--coalition", "0,0,5"] if command == "effects" else []
    cases = [
        (latin1, "not UTF-8 text (byte 0xe9 at offset"),
        (tmp_path / "missing.yaml", "cannot read scenario file"),
        (huge, "types: Σ count = 100000000000000000010 clients exceed 1e+15"),
    ]
    for path, rule in cases:
        got = CliRunner().invoke(cli, [command, str(path), *extra])
        assert got.exit_code == 2, (path, got.output)
        lines = got.output.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"Error: {path}: "), got.output
        assert rule in lines[0], got.output
        assert got.exception is None or isinstance(got.exception, SystemExit)


def test_compare_fits_80_columns_without_cutting_a_cell() -> None:
    """Every line of `mots compare` at 80 columns fits, with every mechanism's full name and a
    legend for the short headers (issue 17: cells were cut to `swan_…`)."""
    got = CliRunner().invoke(cli, ["compare", PAPER], terminal_width=80, env={"COLUMNS": "80"})
    assert got.exit_code == 0, got.output
    lines = got.output.splitlines()
    assert max(len(line) for line in lines) <= 80, got.output
    assert "…" not in got.output
    for name in ("swan_robust", "swan", "modified_fl", "dynamic", "fl_optimum"):
        assert any(line.split()[:1] == [name] for line in lines if line.strip()), name
    assert "K, B: final participants and buyers per type" in got.output


def test_solve_json_rounds_floats_to_the_stated_precision() -> None:
    """Issue 26: `mots solve --json` printed 1.0500000000000003; floats now carry at most 12
    significant digits, as --help states."""
    import json as _json
    import re

    from click.testing import CliRunner

    from mots.cli.main import cli

    result = CliRunner().invoke(cli, ["solve", "examples/scenarios/paper_mnist.yaml", "--json"])
    assert result.exit_code == 0, result.output
    doc = _json.loads(result.stdout)
    assert doc["mechanism"]["price"] == 1.05
    digits = [len(m.replace(".", "").lstrip("0")) for m in re.findall(r"\d+\.\d+", result.stdout)]
    assert max(digits) <= 12
