"""Issue 24's verification attacks mounted by a majority of a round, on a real local federation.

Three honest participants (one per type) train beside five attackers
(:mod:`benchmarks.integrity.adversary`): two that train on random images and labels, one that
replays the weights it sent before, one that sends half its update plus noise of the same norm,
one that takes E/4 of the E steps asked (5 of 20). Attackers are 5 of the 8 participants of every round,
so a check that leans on the peers' statistics would be theirs to steer; the verdicts here come
from the server's own references (:mod:`mots.training.anchored`). Rows, per attacker:
``garbage_data_majority``, ``stale_replay``, ``noise_diluted``, ``lazy_steps``; ``paid`` counts
the attackers whose updates were verified in every round they were asked (the only ones the round
machine pays), as a string ("0" when none).
"""

from __future__ import annotations

import time
from pathlib import Path

from benchmarks.integrity.federation import Outcome, verification_attacks

LAYOUT = ("garbage_data", "stale_replay", "noise_diluted", "lazy_steps", "garbage_data")
"""The attackers of a run (the honest three come first)."""
ROWS = {
    "garbage_data": "garbage_data_majority",
    "stale_replay": "stale_replay",
    "noise_diluted": "noise_diluted",
    "lazy_steps": "lazy_steps",
}


def majority_attacks(workdir: Path, *, rounds: int = 3, seed: int = 0) -> Outcome:
    """One federation of 3 honest nodes and the 5 attackers of :data:`LAYOUT`; rows renamed."""
    raw = verification_attacks(workdir, LAYOUT, rounds=rounds, seed=seed)
    out = Outcome(
        honest_rounds=raw.honest_rounds,
        honest_flagged=raw.honest_flagged,
        published=raw.published,
        seconds=raw.seconds,
    )
    for name, a in raw.attacks.items():
        row = out.attack(ROWS[name])
        row.tried, row.refused_or_caught, row.detail = a.tried, a.refused_or_caught, a.detail
        missed = a.tried - a.refused_or_caught
        row.paid = "0" if missed == 0 else f"{missed} attacker(s) verified in every round"
    return out


def honest_only(workdir: Path, *, rounds: int = 3, seed: int = 0) -> Outcome:
    """Nine honest participants (three per type) and no attacker: the false-positive rate of the
    anchored checks on the real federation (every honest participant-round counted)."""
    from benchmarks.integrity.federation import _honest_rounds, _port, config
    from mots.training.deployment import run_app
    from mots.training.federation import LocalFederation
    from mots.training.verification import VerificationPolicy

    node_types = [0, 0, 0, 1, 1, 1, 2, 2, 2]
    pol = VerificationPolicy(min_share=0.25)
    out = Outcome()
    start = time.perf_counter()
    with LocalFederation(
        n_nodes=len(node_types),
        node_types=node_types,
        superlink_port=_port(len(node_types)),
        workdir=workdir,
        policy=pol,
    ) as fed:
        ids = {int(n["node_id"]) for n in fed.nodes}
        data = run_app(fed, (3, 3, 3), config([3, 3, 3], rounds, seed), policy=pol)
    _honest_rounds(data, ids, out)
    out.published.append(bool(data.get("published")))
    out.seconds = time.perf_counter() - start
    return out
