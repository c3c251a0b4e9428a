"""Mechanisms behind one interface: SWAN (paper and robust variants) and the baselines."""

from mots.economics.mechanisms.base import Mechanism, PotentialMechanism, Quote
from mots.economics.mechanisms.registry import (
    DEFAULT_MECHANISM,
    MECHANISMS,
    ComparisonRow,
    compare_mechanisms,
    get_mechanism,
)
from mots.economics.mechanisms.swan import SwanMechanism, SwanSummary, swan_summary
from mots.economics.mechanisms.swan_robust import RobustSwanMechanism

__all__ = [
    "DEFAULT_MECHANISM",
    "MECHANISMS",
    "ComparisonRow",
    "Mechanism",
    "PotentialMechanism",
    "Quote",
    "RobustSwanMechanism",
    "SwanMechanism",
    "SwanSummary",
    "compare_mechanisms",
    "get_mechanism",
    "swan_summary",
]
