"""Health checks of an edge container: the SuperNode's gRPC health service, the agent's beat.

The containers' checks run ``python -m edge.agent.health agent|supernode``: the standard library
only (and grpc for the SuperNode's), with the settings read straight from MOTS_EDGE_STATE_DIR,
MOTS_EDGE_POLL_INTERVAL_S and MOTS_EDGE_HEALTH_PORT (the registry's defaults,
mots.platform.settings.edge; a test keeps them equal). ``python -m edge.agent health`` loads
the whole agent first (pydantic, httpx, numpy, the economics): measured 3.7 s in the edge
container on this loaded 2-core host, more than compose's 5 s check timeout allows on a busy Pi,
so compose's checks failed while the agents polled fine.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

STATE_DIR = Path("/var/lib/mots/agent")
POLL_INTERVAL_S = 5.0
HEALTH_PORT = 8081


def heartbeat_age_s(state_dir: Path, now: float | None = None) -> float:
    """Seconds since the agent's last successful poll (inf if never)."""
    path = state_dir / "heartbeat"
    if not path.exists():
        return float("inf")
    return (time.time() if now is None else now) - float(path.read_text().strip())


def supernode_serving(port: int, timeout_s: float = 3.0) -> bool:
    """True when the SuperNode's gRPC health service on 127.0.0.1:``port`` answers SERVING."""
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        try:
            reply = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service=""), timeout=timeout_s
            )
        except grpc.RpcError:
            return False
    return bool(reply.status == health_pb2.HealthCheckResponse.SERVING)


def agent_alive(state_dir: Path, poll_interval_s: float, now: float | None = None) -> bool:
    """True when the agent polled the market within the last three intervals (at least 30 s)."""
    return heartbeat_age_s(state_dir, now) <= max(3 * poll_interval_s, 30.0)


def check(what: str, env: Mapping[str, str]) -> bool:
    """The named check with the settings of ``env`` (the container's environment)."""
    if what == "supernode":
        return supernode_serving(int(env.get("MOTS_EDGE_HEALTH_PORT", HEALTH_PORT)))
    if what == "agent":
        state_dir = Path(env.get("MOTS_EDGE_STATE_DIR", str(STATE_DIR)))
        return agent_alive(state_dir, float(env.get("MOTS_EDGE_POLL_INTERVAL_S", POLL_INTERVAL_S)))
    raise ValueError(f"unknown check {what!r}: agent or supernode")


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m edge.agent.health agent|supernode``: 0 when healthy, 1 when not, 2 on misuse."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1 or args[0] not in ("agent", "supernode"):
        print("usage: python -m edge.agent.health agent|supernode", file=sys.stderr)
        return 2
    if check(args[0], os.environ):
        return 0
    print(f"{args[0]}: unhealthy", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
