"""Issue 37's ``sybil_twin`` and ``shirk_after_round0`` on a real local federation (SuperLink,
SuperNodes and resident trainers as processes, TLS and SuperNode authentication, the ServerApp's
verification), beside the in-process trials of :mod:`benchmarks.integrity.copy_shirk`.

Five nodes (:data:`NODE_TYPES`): node 0 is an honest-looking participant of type 0 (D = 50)
whose owner also runs node 4, a second account of type 0 whose trainer
(:mod:`benchmarks.integrity.adversary`, ``sybil_twin``) sends node 0's own update; node 3, of
type 1 (D = 120, as in the in-process trials), trains honestly in round 0 and from round 1 takes
E/4 of the E steps and rescales its update to its honest norm (``shirk_after_round0``); nodes 1
and 2 are honest (types 1 and 2) and are the run's honest participant-rounds. The twin is caught
when both of the owner's accounts (nodes 0 and 4) failed verification; the shirker when it did,
in some round (the round machine then pays it nothing, and its bond is slashed).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.integrity import adversary
from benchmarks.integrity.federation import Outcome, _honest_rounds, _port, config
from mots.training.deployment import run_app
from mots.training.federation import LocalFederation
from mots.training.verification import VerificationPolicy

NODE_TYPES = (0, 1, 2, 1, 0)
"""Node n's type: the owner's first account (0), two honest nodes (1, 2), the shirker (3) and the
owner's twin account (4), whose client index 1 of type 0 trains as client 0."""
TWIN_PAIR = (0, 4)
SHIRKER = 3
HONEST = (1, 2)


def copy_shirk_federation(
    workdir: Path, *, rounds: int = 5, seed: int = 0, policy: VerificationPolicy | None = None
) -> tuple[Outcome, dict[str, Any]]:
    """One federation run of :data:`NODE_TYPES`: the rows' tries and each account's verdict."""
    script = str(Path(adversary.__file__).resolve())
    argv = {
        SHIRKER: [sys.executable, script, "--attack", "shirk_after_round0"],
        TWIN_PAIR[1]: [sys.executable, script, "--attack", "sybil_twin"],
    }
    counts = [NODE_TYPES.count(i) for i in range(3)]
    pol = policy or VerificationPolicy(min_share=0.25)
    out = Outcome()
    start = time.perf_counter()
    with LocalFederation(
        n_nodes=len(NODE_TYPES),
        node_types=list(NODE_TYPES),
        superlink_port=_port(len(NODE_TYPES)),
        workdir=workdir,
        policy=pol,
        trainer_argv=argv,
    ) as fed:
        ids = {int(n["node"]): int(n["node_id"]) for n in fed.nodes}
        data = run_app(fed, tuple(counts), config(counts, rounds, seed), policy=pol)
    status = {p["node_id"]: p for p in data["participant_status"]}
    verdicts = {
        n: f"{status[ids[n]]['status']} in round {status[ids[n]]['left_in_round']}: "
        f"{status[ids[n]]['reason']}"
        for n in (*TWIN_PAIR, SHIRKER)
    }
    failed = {n: status[ids[n]]["status"] == "failed_verification" for n in verdicts}
    out.attack("sybil_twin").add(all(failed[n] for n in TWIN_PAIR), verdicts[TWIN_PAIR[1]])
    out.attack("shirk_after_round0").add(failed[SHIRKER], verdicts[SHIRKER])
    _honest_rounds(data, {ids[n] for n in HONEST}, out)
    out.published.append(bool(data.get("published")))
    out.seconds = time.perf_counter() - start
    return out, {"seed": seed, "verdicts": verdicts, "seconds": round(out.seconds, 1)}
