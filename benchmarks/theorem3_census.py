"""Theorem 3 census: how often the paper's SWAN and robust SWAN reach K* on random markets.

`python -m benchmarks.theorem3_census [--markets 1000]` recomputes the table of docs/mechanisms.md §3.3:
for each regime, with and without ε_req, over seeded random markets with W* > 0, the share where K* is
the only state the paper's dynamics can stop at, and the share reached from a random start and from
the empty market, by the paper's SWAN and by the platform's robust SWAN (budget balance checked).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field

import numpy as np
from rich.console import Console
from rich.progress import track
from rich.table import Table

from mots.economics.dynamics import run_dynamics
from mots.economics.mechanisms.swan import SwanMechanism
from mots.economics.mechanisms.swan_robust import RobustSwanMechanism
from tests.mots.economics.random_markets import random_market, random_start
from tests.mots.economics.test_theorem3 import _terminal_states

SEEDS = {("low", False): 2024, ("low", True): 2025, ("high", False): 2034, ("high", True): 2035}


@dataclass
class Tally:
    """Counts over the markets with W* > 0 of one row."""

    markets: int = 0
    only_kstar: int = 0
    paper_random: int = 0
    paper_empty: int = 0
    robust_random: int = 0
    robust_empty: int = 0
    robust_balanced: int = 0
    welfare_ratio: list[float] = field(default_factory=list)


def census(regime: str, with_requirement: bool, markets: int) -> Tally:
    """Run one row of the census."""
    rng = np.random.default_rng(SEEDS[(regime, with_requirement)])
    tally = Tally()
    label = f"{regime}{' + ε_req' if with_requirement else ''}"
    for _ in track(range(markets), description=f"{label:>12}", transient=True):
        sc = random_market(rng, regime=regime, with_requirement=with_requirement)  # type: ignore[arg-type]
        paper = SwanMechanism(sc)
        k_star = paper.optimum.participants
        k0, b0 = random_start(rng, sc)
        if paper.optimum.welfare <= 0:
            continue
        robust = RobustSwanMechanism(sc)
        zero = np.zeros(sc.n_types, dtype=np.int64)
        tally.markets += 1
        terminal = _terminal_states(paper)
        tally.only_kstar += int(len(terminal) == 1 and np.array_equal(terminal[0], k_star))
        from_random = run_dynamics(sc, paper, k0, b0)
        tally.paper_random += int(np.array_equal(from_random.final_participants, k_star))
        tally.paper_empty += int(
            np.array_equal(run_dynamics(sc, paper, zero, zero).final_participants, k_star)
        )
        tally.welfare_ratio.append(from_random.welfare / paper.optimum.welfare)
        for start, attr in (((k0, b0), "robust_random"), ((zero, zero), "robust_empty")):
            result = run_dynamics(sc, robust, *start)
            reached = np.array_equal(result.final_participants, k_star)
            setattr(tally, attr, getattr(tally, attr) + int(reached))
        cost = robust.incentive_cost(k_star, sc.counts - k_star)
        tally.robust_balanced += int(abs(cost) <= 1e-8 * max(1.0, paper.optimum.welfare))
    return tally


def main() -> None:
    """Print the census table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--markets", type=int, default=1000, help="random markets per row")
    args = parser.parse_args()
    table = Table(title=f"Theorem 3 on {args.markets} seeded random markets per row (rows: W* > 0)")
    for col in (
        "regime", "markets W*>0", "K* only stop", "paper: random start", "paper: empty",
        "mean W/W* paper", "robust: random", "robust: empty", "robust balanced at K*",
    ):  # fmt: skip
        table.add_column(col, justify="right")
    for regime, req in SEEDS:
        t = census(regime, req, args.markets)

        def pct(x: int, t: Tally = t) -> str:
            return f"{x} ({100 * x / max(t.markets, 1):.0f}%)"

        table.add_row(
            f"{regime}{', ε_req' if req else ''}", str(t.markets), pct(t.only_kstar),
            pct(t.paper_random), pct(t.paper_empty), f"{np.mean(t.welfare_ratio):.2f}",
            pct(t.robust_random), pct(t.robust_empty), pct(t.robust_balanced),
        )  # fmt: skip
    Console().print(table)


if __name__ == "__main__":
    main()
