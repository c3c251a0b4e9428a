"""docs/deploy.md's k3s enrolment step issues codes that outlast the tokens and leave spare uses."""

from __future__ import annotations

import re
from pathlib import Path

from dotenv import dotenv_values

ROOT = Path(__file__).resolve().parents[2]
PIS = {"type-1": 10, "type-2": 5, "type-3": 5}
"""The paper's testbed: how many Pis of each type (docs/deploy.md step 2)."""


def _loop() -> tuple[list[list[str]], str]:
    text = (ROOT / "docs/deploy.md").read_text().partition("## Deploying on k3s")[2]
    m = re.search(r'for t in ((?:"[^"]+" ?)+); do set -- \$t\n(.*?)\n\s*done', text, re.S)
    assert m, "docs/deploy.md: the enrolment loop"
    return [row.split() for row in re.findall(r'"([^"]+)"', m.group(1))], m.group(2)


def test_codes_have_spare_uses_and_outlive_the_token() -> None:
    """Each type's code has more uses than the type has Pis, and its --ttl is longer than the
    token's life (k8s platform-config's MOTS_TOKEN_TTL_S)."""
    rows, body = _loop()
    assert '--uses "$4"' in body
    assert {r[0]: int(r[3]) for r in rows}.keys() == PIS.keys()
    for type_name, _, _, uses in rows:
        assert int(uses) > PIS[type_name], type_name
    ttl = re.search(r"--ttl (\d+)", body)
    assert ttl, "the codes' --ttl"
    config = dotenv_values(ROOT / "k8s/base/config/platform-config.env")
    assert int(ttl.group(1)) > int(str(config["MOTS_TOKEN_TTL_S"]))
