"""Measuring a round's model: verify the artifact's SHA-256, then its loss on the held-out test set."""

from __future__ import annotations


def test_loss(
    artifact_path: str, sha256: str, data_dir: str | None, test_subset: int | None
) -> tuple[float, float | None]:
    """(test loss, accuracy) of the model artifact; refuses an artifact whose digest differs."""
    from mots.training.artifacts import evaluate, verify

    if not verify(artifact_path, sha256):
        raise ValueError(f"artifact_sha256: {artifact_path} does not match its published digest")
    loss, accuracy = evaluate(artifact_path, data_dir=data_dir, test_subset=test_subset)
    return float(loss), float(accuracy)
