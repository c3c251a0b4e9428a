"""Issue 24, item 1 on the Flower engine: the money suite's ``revoked_participant`` and
``departed_participant`` with the platform training on the deployment engine
(``MOTS_TRAINER=deployment``: the local federation's SuperLink and SuperNodes, TLS and SuperNode
authentication), rows ``revoked_participant_flower`` and ``departed_participant_flower`` of
``make bench-integrity``.

The same tries as :mod:`benchmarks.integrity.pay_attacks` (a fresh type-3 client joins and is
removed once while the round collects and once while it trains; caught when it is left out of K
or settled as removed and paid nothing) on a fresh platform of its own, then the ledger check.
``MOTS_TRAIN_POLICY`` sets ``quality_factor`` 1000: the suite's 2-round, 2-step training misses
the quality gate's 2 × quoted ε, and every round would else be settled by rule (nobody paid, so
the rows would prove nothing about removal).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from benchmarks.integrity.money import ledger_balanced, start, stop
from benchmarks.integrity.pay_attacks import removal_tries
from benchmarks.integrity.suite import SuiteResult

ROWS = {"revoked": "revoked_participant_flower", "departed": "departed_participant_flower"}


def run(workdir: Path, options: dict[str, Any]) -> SuiteResult:
    """Both removal attacks on one fresh platform training on Flower; the ledger checked."""
    del options
    p = start(
        workdir,
        MOTS_TRAINER="deployment",
        MOTS_TRAIN_POLICY=json.dumps({"quality_factor": 1000}),
    )
    try:
        result = SuiteResult("flower_removals")
        for how, row in ROWS.items():
            result.attacks[row] = removal_tries(p, how).as_dict()
        result.ledger_balanced = ledger_balanced(p)
        return result
    finally:
        stop(p)
