"""The paper's two experimental settings (Table 1, Section 5.A) and the quick/full profiles that run them.

Fashion-MNIST stands in for MNIST and CIFAR-10 here (``/work/shared/DATA.md``): the MNIST-like setting
keeps the MNIST column's sizes and the convex model, the CIFAR-like one the CIFAR-10 column's sizes,
the CNN and the label-skew partition.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

ProfileName = Literal["quick", "full"]

PAPER_COUNTS = (10, 5, 5)
"""N_i per type: 10 type-1, 5 type-2 and 5 type-3 clients (Section 5.A.2)."""

PAPER_UTILITY = (40.0, 16.0)
"""U(ε) = 40·ε^−16 (Section 5.A.2), as (scale, exponent)."""

FIG5_FIXED = ((5, 0), (0, 5))
"""Fig. 5's curves: K1 = 0..N1 with (K2, K3) = (5, 0) and (0, 5)."""


@dataclass(frozen=True)
class PaperAnchors:
    """The fixed values of the paper's figures for one setting, and the numbers it reports."""

    fig_mechanisms: str
    """Figure number of SWAN against the baselines (6 or 7)."""
    fig_frameworks: str
    """Figure number of MoTS against FL (8 or 9)."""
    mech_cost: float
    """C_i/D_i held fixed while ε_req varies in Fig. 6(b) / 7(b)."""
    fw_eps_req: float
    """ε_req held fixed while the cost varies in Fig. 8(a) / 9(a)."""
    fw_cost: float
    """C_i/D_i held fixed while ε_req varies in Fig. 8(b) / 9(b)."""
    welfare_vs_cost: float
    """Reported welfare improvement (%) of MoTS over FL, varying cost."""
    incentive_vs_cost: float
    """Reported incentive-cost change (%), varying cost (negative = reduction)."""
    welfare_vs_req: float
    """Reported welfare improvement (%), varying ε_req."""
    incentive_vs_req: float
    """Reported incentive-cost change (%), varying ε_req."""


@dataclass(frozen=True)
class TrainingPlan:
    """Hyper-parameters of one setting's training (the paper's values are the ``full`` ones)."""

    model: Literal["logistic", "cnn"]
    partition: Literal["iid", "label_skew"]
    batch_size: int
    lr: float
    local_steps: int
    rounds: int
    zero_init: bool
    aggregation: Literal["uniform", "weighted"] = "uniform"


@dataclass(frozen=True)
class Setting:
    """One column of Table 1 as run here: data sizes, training plan per profile, paper anchors."""

    key: str
    title: str
    paper_dataset: str
    sizes: tuple[float, float, float]
    plans: dict[str, TrainingPlan]
    anchors: PaperAnchors
    notes: tuple[str, ...] = field(default_factory=tuple)

    def plan(self, profile: ProfileName) -> TrainingPlan:
        """The training plan of ``profile`` ("quick" or "full")."""
        return self.plans[profile]


MNIST_LIKE = Setting(
    key="iid_logistic",
    title="convex model, i.i.d. data (MNIST column)",
    paper_dataset="MNIST",
    sizes=(50.0, 120.0, 300.0),
    plans={
        # Paper: b = 32, η0 = 0.001, E = 20, R = 500, w0 = 0. With η0 = 0.001 on pixels in [0, 1]
        # the loss barely leaves ln 10 and no network effect shows (issue 3); η0 = 0.5 is the
        # training engine's measured choice under which it does.
        "full": TrainingPlan("logistic", "iid", 32, 0.5, 20, 500, True),
        "quick": TrainingPlan("logistic", "iid", 32, 0.5, 20, 100, True),
    },
    anchors=PaperAnchors("6", "8", 0.002, 1.35, 0.01, 352.42, -93.07, 100.48, -79.38),
)

CIFAR_LIKE = Setting(
    key="noniid_cnn",
    title="non-convex model, non-i.i.d. data (CIFAR-10 column)",
    paper_dataset="CIFAR-10",
    sizes=(1000.0, 2250.0, 5750.0),
    plans={
        # Paper: b = 64, η0 = 0.1, E = 30, R = 600, w0 = 0. A CNN started at exactly zero has zero
        # gradients in every layer but the last bias, so the default initialisation is used.
        "full": TrainingPlan("cnn", "label_skew", 64, 0.1, 30, 600, False),
        "quick": TrainingPlan("cnn", "label_skew", 64, 0.1, 30, 3, False),
    },
    # Fig. 9's captions say ε_req = 0.8 (cost varies) and C_i/D_i = 1.8 (ε_req varies); its labels
    # say the opposite (C_cifar_SvI_R=1.8, R_CIFAR_SvI_C=0.8). The captions are used.
    anchors=PaperAnchors("7", "9", 0.07, 0.8, 1.8, 89.94, -67.51, 109.72, -100.0),
)

SETTINGS: dict[str, Setting] = {s.key: s for s in (MNIST_LIKE, CIFAR_LIKE)}


@dataclass(frozen=True)
class Profile:
    """How much of the paper's protocol a run does: runs (seeds) and test-set size per setting."""

    name: ProfileName
    seeds: int
    test_subset: int | None
    rounds_override: int | None = None

    def rounds(self, setting: Setting) -> int:
        """Communication rounds R for ``setting`` under this profile."""
        if self.rounds_override is not None:
            return self.rounds_override
        return setting.plan(self.name).rounds


QUICK = Profile("quick", seeds=1, test_subset=2000)
"""Minutes on 2 cores: 1 run, few rounds, 2,000 test images."""

FULL = Profile("full", seeds=30, test_subset=None)
"""The paper's protocol: 30 runs, R = 500 / 600, the full 10,000-image test set (hours)."""
