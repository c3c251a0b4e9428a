"""The platform's own Flower federation in `mots platform status` and `mots platform logs`.

A platform whose rounds train on Flower (``MOTS_TRAINER=deployment`` without an external
SuperLink) runs a local federation under ``WORKDIR/federation``: a SuperLink, a warm-fork template,
one SuperNode per client and, for attacking nodes, resident trainers. Its state file names each
process; :func:`federation_rows` probes each one (alive, the SuperLink listening, each SuperNode
``online`` in the SuperLink's node list) so that `status` shows a broken federation as broken
(issue 40: it said every part ``ok`` while every round failed), and :func:`federation_logs` gives
`logs NAME` their logs (``superlink``, ``supernode-03``, ``template``, ``trainer-00``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

FEDERATION_DIR = "federation"
"""WORKDIR's folder of the local federation (the launcher's ``MOTS_FEDERATION_DIR``)."""


def federation_logs(workdir: Path) -> list[Path]:
    """The current log of each federation process (WORKDIR/federation/logs/NAME.log)."""
    return sorted((workdir / FEDERATION_DIR / "logs").glob("*.log"))


def federation_rows(workdir: Path) -> list[dict[str, str]]:
    """One row per process of the local federation (name, log, state ``ok`` or ``exited``,
    ``doing``: what it serves); none while no federation has started (the first round trained
    on Flower starts it) or when its state file cannot be read."""
    from mots.training.federation import STATE_FILE, FederationError, LocalFederation
    from mots.training.processes import alive, listening

    directory = workdir / FEDERATION_DIR
    if not (directory / STATE_FILE).exists():
        return []
    try:
        fed = LocalFederation.attach(directory)
    except (FederationError, KeyError, TypeError, ValueError):
        return []
    online = fed.online_node_ids() if listening(fed.superlink_port) else set()
    rows = []
    for p in fed.processes:
        up = alive(p.pid)
        rows.append(
            {
                "name": p.name,
                "url": p.log,
                "state": "ok" if up else "exited",
                "doing": _doing(fed, p.role, p.name, online) if up else f"pid {p.pid} gone",
            }
        )
    return rows


def _doing(fed: Any, role: str, name: str, online: set[int]) -> str:
    """What one live federation process serves, as its probes say."""
    from mots.training.processes import listening

    if role == "superlink":
        if not listening(fed.superlink_port):
            return f"not listening on {fed.address}"
        return f"Control API {fed.address}, Fleet API {fed.fleet_address}; {len(online)} online"
    if role == "template":
        return "forks the warm SuperNodes"
    index = int(name.split("-")[-1]) if name.split("-")[-1].isdigit() else -1
    node = fed.nodes[index] if 0 <= index < len(fed.nodes) else None
    if node is None:
        return role
    who = f"{fed.type_names[int(node['type_index'])]} #{node['client_index']}"
    if role == "trainer":
        return f"trains for node {index:02d} ({who})"
    node_id = node.get("node_id")
    state = "online" if node_id in online else "not online"
    return f"node {node_id} ({who}), {state} at the SuperLink"
