"""Integrity benchmark (issues 13 and 14): every attack against a freshly started platform.

Run with ``make bench-integrity`` (``.venv/bin/python -m benchmarks.bench_integrity``). Each suite
is a module under ``benchmarks/integrity`` with a ``run(workdir, options) -> SuiteResult``
function, listed in :data:`SUITES`; this script runs them, merges what they report and writes
``out/bench/integrity.json`` in the contract of issue 13 item 7::

    {"attacks": {NAME: {"tried": n, "refused_or_caught": n, "paid": "0"}},
     "honest": {"participant_rounds": n, "flagged": n},
     "ledger_balanced": bool, "latency_ratio": float}

(``ledger_balanced`` is null until a suite that moves money checks the ledger.) The federation
suite (:mod:`benchmarks.integrity.federation_suite`) adds ``forged_node``, ``identity_theft``,
``free_rider``, ``random_weights``, ``scaled_weights``, ``nan_weights``, ``label_flip``,
``dropout`` and issue 24's ``garbage_data_majority``, ``stale_replay``, ``noise_diluted`` and
``lazy_steps`` (attackers 5 of the 8 participants of a round), with nine honest nodes alone so the
honest participant-rounds exceed 100; the market's attacks are the money suite
(:mod:`benchmarks.integrity.money`), and ``revoked_participant_flower`` and
``departed_participant_flower`` repeat its removal rows on a platform training on Flower
(:mod:`benchmarks.integrity.flower_removals`); issue 37's ``sybil_twin`` and
``shirk_after_round0`` run in process with the ServerApp's verification and on a real local
federation (:mod:`benchmarks.integrity.copy_shirk`,
:mod:`benchmarks.integrity.federation_copy_shirk`); its ``type_added_between_rounds``, ``money_overflow``,
``id_overflow`` and ``debt_model`` run in process on SQLite and PostgreSQL
(:mod:`benchmarks.integrity.market_limits`), and its ``restart_revocation``, ``idle_burst``,
``xff_spoof`` and ``db_connection_killed`` on SQLite and PostgreSQL
(:mod:`benchmarks.integrity.durability`). The same is
printed as a table; the exit status is 1 when an attack target is missed (every attack caught
in every try except ``label_flip``, caught in ≥ 90% of the tries whose update raised the
validation loss beyond the verification's tolerance, and a row whose ``target`` is
``"deterred"``, ``shirk_after_round0``, whose detection is a measured rate: met when its tries'
payoff sums, bonds slashed included, leave the shirker below the honest participant
(:func:`benchmarks.integrity.copy_shirk.deterrence`); honest participant-rounds flagged ≤ 1%).
"""

from __future__ import annotations

import argparse
import importlib
import json
import shutil
import sys
from pathlib import Path
from typing import Any

from benchmarks.integrity.suite import SuiteResult

SUITES = (
    "benchmarks.integrity.federation_suite",
    "benchmarks.integrity.money",
    "benchmarks.integrity.flower_removals",
    "benchmarks.integrity.copy_shirk",
    "benchmarks.integrity.market_limits",
    "benchmarks.integrity.durability",
)
"""Modules whose ``run(workdir, options)`` returns a :class:`SuiteResult`."""
LABEL_FLIP_TARGET = 0.9
HONEST_FLAGGED_TARGET = 0.01
LATENCY_TARGET = 1.10


def merge(results: list[SuiteResult]) -> dict[str, Any]:
    """The contract's JSON from the suites' results."""
    attacks: dict[str, dict[str, Any]] = {}
    for r in results:
        for name, a in r.attacks.items():
            if name in attacks:
                raise ValueError(f"attack {name} is reported by two suites")
            attacks[name] = a
    ledgers = [r.ledger_balanced for r in results if r.ledger_balanced is not None]
    ratios = [r.latency_ratio for r in results if r.latency_ratio is not None]
    rounds = sum(r.honest_rounds for r in results)
    flagged = sum(r.honest_flagged for r in results)
    return {
        "attacks": attacks,
        "honest": {"participant_rounds": rounds, "flagged": flagged},
        "ledger_balanced": all(ledgers) if ledgers else None,
        "latency_ratio": max(ratios) if ratios else None,
        "suites": {r.name: r.extra for r in results},
    }


def targets(report: dict[str, Any]) -> dict[str, bool]:
    """Which of the issues' targets the report meets."""
    out: dict[str, bool] = {}
    for name, a in report["attacks"].items():
        if name == "label_flip":
            harmful = int(a.get("harmful_tries", a["tried"]))
            caught = int(a.get("harmful_caught", a["refused_or_caught"]))
            out[name] = caught >= LABEL_FLIP_TARGET * harmful
        elif a.get("target") == "deterred":
            out[name] = a["tried"] >= 2 and bool(a["deterred"])
        else:
            out[name] = a["tried"] > 0 and a["refused_or_caught"] == a["tried"] and a["paid"] == "0"
    honest = report["honest"]
    out["honest_flagged"] = honest["flagged"] <= HONEST_FLAGGED_TARGET * max(
        1, honest["participant_rounds"]
    )
    if report["ledger_balanced"] is not None:
        out["ledger_balanced"] = bool(report["ledger_balanced"])
    return out


def table(report: dict[str, Any]) -> str:
    """The report as a plain-text table."""
    rows = [f"{'attack':<20} {'tried':>6} {'caught':>7} {'paid':>8}"]
    for name, a in report["attacks"].items():
        rows.append(f"{name:<20} {a['tried']:>6} {a['refused_or_caught']:>7} {a['paid']!s:>8}")
        if a.get("target") == "deterred":
            rows.append(
                f"  {'deterred' if a['deterred'] else 'NOT deterred'}: detected "
                f"{a['detection_rate']:.2f} against the bond's q = {a['bond_detection_rate']}"
                f" (B_i = {a['bond_over_cost']:.2f}·C_i); payoff sums in C_i, shirker "
                f"{a['shirk_payoff_sum']:.2f} over {a['tried']} tries, honest "
                f"{a['honest_payoff_sum']:.2f} over {a['honest_tries']}"
            )
    h = report["honest"]
    rows.append(f"honest participant-rounds {h['participant_rounds']}, flagged {h['flagged']}")
    ratio = report["latency_ratio"]
    rows.append(
        "latency ratio (TLS + authentication + verification / none) "
        + ("n/a" if ratio is None else f"{ratio:.3f}")
    )
    ledger = report["ledger_balanced"]
    rows.append(f"ledger balanced: {'not checked' if ledger is None else ledger}")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    """Run every suite; write the report; 0 when every attack target is met."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=Path("out/bench"))
    p.add_argument("--seeds", default="0,1,2", help="seeds of the verification-attack runs")
    p.add_argument("--rounds", type=int, default=3, help="FedAvg rounds per federation run")
    p.add_argument("--latency-repeats", type=int, default=2, help="secure/plain pairs (0: skip)")
    p.add_argument("--suite", action="append", help="run only these suite modules")
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    work = args.out / "integrity-run"
    shutil.rmtree(work, ignore_errors=True)
    options = {
        "seeds": [int(s) for s in args.seeds.split(",") if s.strip()],
        "rounds": args.rounds,
        "latency_repeats": args.latency_repeats,
    }
    results = []
    for module in args.suite or SUITES:
        name = module.rsplit(".", 1)[-1]
        results.append(importlib.import_module(module).run(work / name, options))
    report = merge(results)
    report["targets"] = targets(report)
    (args.out / "integrity.json").write_text(json.dumps(report, indent=1))
    print(table(report))
    missed = [k for k, ok in report["targets"].items() if not ok]
    print("targets met" if not missed else f"targets missed: {missed}")
    shutil.rmtree(work, ignore_errors=True)
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
