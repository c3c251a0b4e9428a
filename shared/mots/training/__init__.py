"""Federated training of the market's model (Section 5): data, models, FedAvg, Flower, sweeps.

Modules import torch lazily where they can, so that light callers (the Flower ClientApp's
no-torch path, the CLI's help) stay cheap. Entry points: :func:`mots.training.runner.train_coalition`,
:func:`mots.training.sweep.run_sweep`, :class:`mots.training.federation.LocalFederation`.
"""
