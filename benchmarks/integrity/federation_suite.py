"""The federation's suite of ``make bench-integrity``: every attack of
:mod:`benchmarks.integrity.federation` on fresh local federations, the honest participants'
rounds over several seeds, the latency of TLS + authentication + verification, and the
unit-level false-positive rate of verification (:mod:`benchmarks.integrity.simulate`); issue
24's attacks by a majority of the round and nine honest participants alone
(:mod:`benchmarks.integrity.federation_majority`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmarks.integrity import federation as fed
from benchmarks.integrity.federation_majority import honest_only, majority_attacks
from benchmarks.integrity.suite import SuiteResult


def run(workdir: Path, options: dict[str, Any]) -> SuiteResult:
    """Identity attacks, the verification attacks once per seed, a drop-out, the latency."""
    rounds = int(options.get("rounds", 3))
    seeds = list(options.get("seeds", [0, 1, 2]))
    out = fed.identity_attacks(workdir / "identity", rounds=rounds)
    for seed in seeds:
        out.merge(fed.verification_attacks(workdir / f"verify-{seed}", rounds=rounds, seed=seed))
    out.merge(fed.dropout(workdir / "dropout", rounds=rounds))
    for seed in seeds:  # issue 24: attackers are 5 of the 8 participants of every round
        out.merge(majority_attacks(workdir / f"majority-{seed}", rounds=rounds, seed=seed))
    # nine honest nodes alone, 5 rounds: with the runs above, >= 100 honest participant-rounds
    out.merge(honest_only(workdir / "honest", rounds=max(rounds, 5)))
    result = SuiteResult(
        "federation",
        attacks={name: a.as_dict() for name, a in out.attacks.items()},
        honest_rounds=out.honest_rounds,
        honest_flagged=out.honest_flagged,
    )
    result.extra["published"] = out.published
    result.extra["seconds"] = out.seconds
    repeats = int(options.get("latency_repeats", 2))
    if repeats > 0:
        lat = fed.latency(workdir / "latency", rounds=rounds, repeats=repeats)
        result.latency_ratio = float(lat["latency_ratio"])
        result.extra["latency"] = lat
    from benchmarks.integrity.simulate import measure

    result.extra["unit_level"] = measure(seeds, rounds=12).as_dict()
    return result
