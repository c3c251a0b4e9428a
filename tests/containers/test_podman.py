"""tests/containers/podman.py against real podman: cleanup removes what the parts made."""

from __future__ import annotations

import pytest

from tests.containers import podman
from tests.containers.base import base_image
from tests.containers.conftest import require_base

pytestmark = [pytest.mark.integration]

PREFIX = "mots-ct-rmtest"


def test_remove_takes_containers_others_depend_on(runtime: None) -> None:
    """Compose's services require their data tier (`--requires`): podman refuses to remove a
    container whose dependents still exist, so one `rm --force` of the whole list left redis,
    postgres, the SuperLink and the market behind (a failed compose round in CI). Removing again
    until nothing is left takes them all."""
    image = base_image("amd64")
    require_base(image)
    podman.remove([PREFIX])
    base, dependent = f"{PREFIX}-base", f"{PREFIX}-dependent"
    try:
        podman.podman("create", "--name", base, image, "sleep", "60")
        podman.podman("create", "--name", dependent, "--requires", base, image, "sleep", "60")
        assert podman.remove([PREFIX]) == {kind: [] for kind in podman.KINDS}
    finally:
        for name in (dependent, base):
            podman.podman("rm", "--force", name, check=False)
