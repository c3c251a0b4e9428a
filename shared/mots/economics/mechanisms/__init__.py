"""Mechanisms behind one interface: SWAN (paper and robust variants) and the baselines.

Nothing here imports :mod:`mots.economics.dynamics` (which builds on :mod:`.base`), so either can be
imported first; the side-by-side run lives in :mod:`mots.economics.comparison`.
"""

from mots.economics.mechanisms.base import Mechanism, PotentialMechanism, Quote
from mots.economics.mechanisms.registry import (
    DEFAULT_MECHANISM,
    MECHANISMS,
    get_mechanism,
)
from mots.economics.mechanisms.swan import SwanMechanism, SwanSummary, swan_summary
from mots.economics.mechanisms.swan_robust import RobustSwanMechanism

__all__ = [
    "DEFAULT_MECHANISM",
    "MECHANISMS",
    "Mechanism",
    "PotentialMechanism",
    "Quote",
    "RobustSwanMechanism",
    "SwanMechanism",
    "SwanSummary",
    "get_mechanism",
    "swan_summary",
]
