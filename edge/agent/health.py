"""Health checks of an edge container: the SuperNode's gRPC health service, the agent's beat."""

from __future__ import annotations

from pathlib import Path

from edge.agent.runner import heartbeat_age_s


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
