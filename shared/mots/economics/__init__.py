"""The economics core: pure functions of numbers for the MoTS framework and the SWAN mechanism.

Nothing here does I/O. Every formula cites its place in Li, Luo, Huang, Luo, "Mechanism Design for
Federated Learning with Non-Monotonic Network Effects" (the paper).
"""

from mots.economics.error import error_from_totals, generalization_error, inverse_size_sum
from mots.economics.scenario import ClientType, ErrorModel, Scenario
from mots.economics.utility import ExponentialUtility, PowerUtility, Utility
from mots.economics.welfare import welfare_all_served, welfare_fl, welfare_mots

__all__ = [
    "ClientType",
    "ErrorModel",
    "ExponentialUtility",
    "PowerUtility",
    "Scenario",
    "Utility",
    "error_from_totals",
    "generalization_error",
    "inverse_size_sum",
    "welfare_all_served",
    "welfare_fl",
    "welfare_mots",
]
