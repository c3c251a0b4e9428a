"""``mots.platform.serve``: several API processes on one port, connections spread over them."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI

from benchmarks.raw_http import exchange
from mots.local.launcher import free_port

ROOT = Path(__file__).resolve().parents[3]


def make_app() -> FastAPI:
    """An app that answers which process served the request."""
    app = FastAPI()

    @app.get("/pid")
    async def pid() -> dict[str, int]:
        return {"pid": os.getpid()}

    @app.get("/processes")
    async def processes() -> str | None:
        return os.environ.get("MOTS_API_PROCESSES")

    return app


def _wait_ready(port: int, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            httpx.get(f"http://127.0.0.1:{port}/pid", timeout=1.0)
            return
        except httpx.HTTPError:
            time.sleep(0.2)
    raise TimeoutError(f"nothing answers on port {port}")


async def _pids(port: int, connections: int) -> set[int]:
    """The serving process of the first request on each of ``connections`` connections opened
    at once (as a load generator's pool is)."""
    req = f"GET /pid HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode()

    async def one() -> int:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            await asyncio.sleep(0.2)  # every connection opened before any request is sent
            status, body = await exchange(reader, writer, req)
            assert status == 200
            return int(body.decode().split(":")[1].rstrip("}"))
        finally:
            writer.close()

    return set(await asyncio.gather(*(one() for _ in range(connections))))


@pytest.mark.integration
def test_two_workers_share_the_connections_and_stop_on_sigterm() -> None:
    """Two processes on one port: 32 connections opened at once reach both (the kernel hashes
    each new connection to a socket; all 32 on one would be 1 in 2^31), and SIGTERM to the
    supervisor stops both."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "mots.platform.serve", "tests.mots.platform.test_serve:make_app",
         "--port", str(port), "--workers", "2"],
        cwd=ROOT, start_new_session=True,
    )  # fmt: skip
    try:
        _wait_ready(port)
        time.sleep(1.0)  # the second worker too
        pids = asyncio.run(_pids(port, 32))
        assert len(pids) == 2 and proc.pid not in pids
        # each child knows how many serve beside it (the market shares its writers by it)
        assert httpx.get(f"http://127.0.0.1:{port}/processes", timeout=5).json() == "2"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
        for pid in pids:
            assert (
                not Path(f"/proc/{pid}").exists()
                or "Z" in Path(f"/proc/{pid}/stat").read_text().split()[2]
            )
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
