"""Measuring a round's model: verify the artifact's SHA-256, then its loss on the held-out test set."""

from __future__ import annotations


def test_loss(
    artifact_path: str, sha256: str, data_dir: str | None, test_subset: int | None
) -> tuple[float, float | None]:
    """(test loss, accuracy) of the model artifact; refuses an artifact whose digest differs."""
    from mots.training import artifacts

    if not artifacts.verify(artifact_path, sha256):
        raise ValueError(f"artifact_sha256: {artifact_path} does not match its published digest")
    return artifacts.evaluate(artifact_path, data_dir=data_dir, test_subset=test_subset)
