"""Every service's API documentation renders in a real browser with the network cut off.

Each service runs in uvicorn on a free port; headless Chromium (Debian's, installed by
``scripts/ensure_system.sh``) loads its Swagger UI (``/docs``) and ReDoc (``/redoc``) with every
host but 127.0.0.1 unreachable (a dead proxy and a resolver that finds no name), and the test finds
each documented route rendered: an ``opblock`` per operation in Swagger UI, an operation section in
ReDoc. A plain FastAPI app, whose pages load Swagger UI from a CDN, renders nothing under the same
flags: the cut is real.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import uvicorn
from fastapi import FastAPI

from mots.local.launcher import free_port
from services.market.core.config import Settings as MarketSettings
from services.market.main import create_app as market_app
from services.orchestration.core.config import Settings as OrchestrationSettings
from services.orchestration.main import create_app as orchestration_app
from services.pricing.core.config import Settings as PricingSettings
from services.pricing.main import create_app as pricing_app

pytestmark = pytest.mark.integration
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
OFFLINE_FLAGS = [
    "--proxy-server=127.0.0.1:9",  # nothing listens on the discard port: every proxied fetch fails
    "--proxy-bypass-list=127.0.0.1",  # ... except the service under test
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
]


@contextmanager
def serving(app: FastAPI) -> Iterator[str]:
    """``app`` in uvicorn on a free port of 127.0.0.1 (lifespan run) until the block ends."""
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=free_port(), log_level="warning")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{server.config.port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)


def rendered_dom(url: str, profile: Path) -> str:
    """The page's DOM after its scripts ran (10 s of virtual time), the network cut off."""
    assert CHROMIUM is not None
    cmd = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        f"--user-data-dir={profile}",
        *OFFLINE_FLAGS,
        "--virtual-time-budget=10000",
        "--dump-dom",
        url,
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def _apps(workdir: Path) -> dict[str, FastAPI]:
    prefix = f"mots-docs-{workdir.name}:"
    market_db = f"sqlite:///{workdir / 'market.db'}"
    orchestration_db = f"sqlite:///{workdir / 'orchestration.db'}"
    return {
        "market": market_app(
            MarketSettings(
                database_url=market_db, redis_key_prefix=prefix, artifact_dir=str(workdir)
            )
        ),
        "pricing": pricing_app(PricingSettings()),
        "orchestration": orchestration_app(
            OrchestrationSettings(database_url=orchestration_db, redis_key_prefix=prefix)
        ),
    }


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (scripts/ensure_system.sh)")
@pytest.mark.parametrize("service", ["market", "pricing", "orchestration"])
def test_docs_render_every_route_offline(service: str, tmp_path: Path) -> None:
    """Swagger UI shows one opblock per documented operation, ReDoc one section per operation."""
    app = _apps(tmp_path)[service]
    operations = [
        (method, path)
        for path, item in app.openapi()["paths"].items()
        for method in item
        if method in {"get", "post", "put", "delete", "patch"}
    ]
    assert operations
    with serving(app) as url:
        swagger = rendered_dom(f"{url}/docs", tmp_path / "profile")
        redoc = rendered_dom(f"{url}/redoc", tmp_path / "profile")
    assert swagger.count('class="opblock opblock-') == len(operations), swagger[-3000:]
    for method, path in operations:
        assert f'data-path="{path}"' in swagger, (method, path)
    for op in app.openapi()["paths"].values():
        for method, spec in op.items():
            assert f'data-section-id="operation/{spec["operationId"]}"' in redoc, method


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (scripts/ensure_system.sh)")
def test_a_cdn_page_renders_nothing_with_the_network_cut_off() -> None:
    """FastAPI's own /docs fetches Swagger UI from a CDN: under the same flags, no opblock."""
    app = FastAPI()

    @app.get("/v1/ping")
    def ping() -> dict[str, str]:
        return {"pong": "yes"}

    with tempfile.TemporaryDirectory() as profile, serving(app) as url:
        dom = rendered_dom(f"{url}/docs", Path(profile))
    assert 'id="swagger-ui"' in dom and "opblock" not in dom
