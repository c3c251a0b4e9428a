"""One market's headline numbers: ε_min, K*, SWAN's schedule at K*, and the FL framework's best.

This is the JSON contract of `mots solve --json` (issue 2, item 9), built from the pure core so the
pricing service and the CLI report the same figures.
"""

from __future__ import annotations

from typing import Any

from mots.economics.mechanisms.fl_optimum import FLOptimumMechanism
from mots.economics.mechanisms.swan import swan_summary
from mots.economics.optimum import RequirementInfeasibleError, min_error, regime


def market_summary(scenario: Any) -> dict[str, Any]:
    """The `mots solve --json` document: regime, eps_min, optimum, mechanism, fl_optimum.

    Raises :class:`RequirementInfeasibleError` (stating ε_min) when ε_req < ε_min.
    """
    eps_min, _ = min_error(scenario)
    if scenario.eps_req is not None and scenario.eps_req < eps_min:
        raise RequirementInfeasibleError(scenario.eps_req, eps_min)
    swan = swan_summary(scenario)
    opt = swan.optimum
    fl_mech = FLOptimumMechanism(scenario)
    fl = fl_mech.optimum
    return {
        "regime": regime(scenario),
        "eps_min": eps_min,
        "optimum": {
            "participants": opt.participants.tolist(),
            "buyers": opt.buyers.tolist(),
            "welfare": opt.welfare,
            "epsilon": opt.epsilon,
        },
        "mechanism": {
            "price": swan.price,
            "rewards": swan.rewards.tolist(),
            "tau": swan.tau,
            "L0": swan.L0,
            "lambda": swan.lam,
            "incentive_cost": swan.incentive_cost,
        },
        "fl_optimum": {
            "participants": fl.participants.tolist(),
            "welfare": fl.welfare,
            "epsilon": fl.epsilon,
            "incentive_cost": fl_mech.incentive_cost(fl.participants, fl.buyers),
        },
    }
