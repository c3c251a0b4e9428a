"""Issue 40 item 5: the market signs what it publishes (one ed25519 key per deployment, its public
half on GET /.well-known/mots-model-key) and a buyer checks the origin offline with that key."""

from __future__ import annotations

import hashlib
import json
from decimal import Decimal
from pathlib import Path

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from mots.cli.main import cli
from mots.client import MarketClient
from mots.client.model_file import ModelFileError, verify_origin
from mots.platform.contracts import SettlePayload
from mots.platform.db import in_transaction
from services.market import rounds
from tests.mots.client.model_files import write_model
from tests.services.market.test_sdk_against_market import LoseAnswers


def _published(market: TestClient, register, fund, open_round) -> tuple[dict, Path]:  # type: ignore[no-untyped-def]
    """A round trained by one client, bought by another at 2.5, published with a real file."""
    root = Path(market.app.state.settings.artifact_dir)
    artifact = root / "round-0001.pt2"
    meta = {"dataset": "fashion-mnist", "model": "logistic", "participants": [1], "round": 1,
            "epsilon": 0.7}  # fmt: skip
    digest = write_model(artifact, meta)
    trainer, buyer = register(name="t"), register(name="b")
    fund(buyer["id"], "10")
    open_round(price="2.5", rewards={"small": "0.5"})
    market.put("/v1/rounds/1/decision", json={"strategy": "join"}, headers=trainer["auth"])
    r = market.post(
        "/v1/purchases",
        json={"round_id": 1},
        headers={**buyer["auth"], "Idempotency-Key": "buyer-1-key"},
    )
    assert r.status_code == 201, r.text
    payload = SettlePayload(
        round_id=1,
        rewards={"small": Decimal("0.5")},
        participants=[trainer["id"]],
        artifact_path=str(artifact),
        artifact_sha256=digest,
    )
    in_transaction(market.app.state.sessions, lambda s: rounds.settle_round(s, payload))
    in_transaction(market.app.state.sessions, lambda s: rounds.publish(s, 1))
    return buyer, artifact


def test_a_bought_model_verifies_offline_with_the_markets_key(
    market: TestClient, register, fund, open_round, tmp_path: Path
) -> None:
    """The download's sidecar carries price, signature and key id; the well-known key checks
    it with no server; a changed price, a changed file or another key fails, naming why."""
    buyer, artifact = _published(market, register, fund, open_round)
    key = market.get("/.well-known/mots-model-key").json()  # no token needed
    assert key["algorithm"] == "ed25519" and len(key["key_id"]) == 16
    again = market.get("/.well-known/mots-model-key").json()
    assert again == key  # one key per deployment
    assert not list(artifact.parent.glob("*key*"))  # derived from the secret: no key file
    client = MarketClient("http://testserver", buyer["token"], transport=LoseAnswers(market, set()))
    got = client.download_model(1, tmp_path / "dl")
    side = json.loads(got.metadata_path.read_text()) if got.metadata_path else {}
    assert side["price"] == "2.500000" and side["key_id"] == key["key_id"]
    info = verify_origin(got.path, key["public_key"])
    assert (
        info["round_id"] == 1
        and info["sha256"] == hashlib.sha256(got.path.read_bytes()).hexdigest()
    )
    (tmp_path / "key.json").write_text(json.dumps(key))
    ok = CliRunner().invoke(
        cli, ["model", "verify", str(got.path), "--public-key", str(tmp_path / "key.json")]
    )
    assert ok.exit_code == 0 and f"signed by the market (key {key['key_id']})" in ok.output
    shown = CliRunner().invoke(cli, ["model", "info", str(got.path)])
    assert "price          2.500000" in shown.output and "market round   1" in shown.output

    got.metadata_path.write_text(json.dumps({**side, "price": "0.000001"}))  # type: ignore[union-attr]
    with pytest.raises(ModelFileError, match="the file's origin is not that market"):
        verify_origin(got.path, key["public_key"])
    got.metadata_path.write_text(json.dumps(side))  # type: ignore[union-attr]
    other = "A" * 43 + "="  # a well-formed key that is not the market's
    with pytest.raises(ModelFileError, match="signature: not made by key"):
        verify_origin(got.path, other)
    refused = CliRunner().invoke(cli, ["model", "verify", str(got.path), "--public-key", other])
    assert refused.exit_code == 1 and "origin is not that market" in refused.output
