"""What an integrity suite reports to ``benchmarks.bench_integrity`` (one module per suite)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class SuiteResult:
    """A suite's attacks in the contract's shape, its honest participant-rounds, and what else
    it measured (``ledger_balanced``/``latency_ratio`` None: not measured by this suite)."""

    name: str
    attacks: dict[str, dict[str, Any]] = field(default_factory=dict)
    honest_rounds: int = 0
    honest_flagged: int = 0
    ledger_balanced: bool | None = None
    latency_ratio: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)
