"""Mechanisms by name; the platform's default is robust SWAN (the side-by-side run is :mod:`mots.economics.comparison`)."""

from __future__ import annotations

from mots.economics.mechanisms.base import Mechanism
from mots.economics.mechanisms.dynamic import DynamicMechanism
from mots.economics.mechanisms.fl_optimum import FLOptimumMechanism
from mots.economics.mechanisms.modified_fl import ModifiedFLMechanism
from mots.economics.mechanisms.swan import SwanMechanism
from mots.economics.mechanisms.swan_robust import RobustSwanMechanism
from mots.economics.scenario import Scenario

MECHANISMS: dict[str, type[Mechanism]] = {
    cls.name: cls
    for cls in (
        RobustSwanMechanism,
        SwanMechanism,
        ModifiedFLMechanism,
        DynamicMechanism,
        FLOptimumMechanism,
    )
}
DEFAULT_MECHANISM = "swan_robust"


def get_mechanism(name: str, scenario: Scenario) -> Mechanism:
    """The mechanism called ``name``, built for ``scenario``; an unknown name lists the known ones."""
    try:
        cls = MECHANISMS[name]
    except KeyError:
        raise ValueError(
            f"mechanism: unknown name {name!r}; choose one of {', '.join(sorted(MECHANISMS))}"
        ) from None
    return cls(scenario)
