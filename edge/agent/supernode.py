"""Starting the Flower SuperNode with this device's facts in its node config.

The ClientApp reads them with ``context.node_config`` (``client-type``, ``data-size``,
``data-dir``, ``client-name`` and any extra pairs from ``MOTS_EDGE_NODE_CONFIG``).
"""

from __future__ import annotations

import os
import shlex
import shutil

from edge.agent.settings import AgentSettings


def node_config(settings: AgentSettings) -> str:
    """The ``--node-config`` string: strings quoted, numbers bare, extra pairs appended."""
    pairs = [
        f"client-type={_quote(settings.client_type)}",
        f"data-size={settings.data_size}",
        f"data-dir={_quote(str(settings.data_dir))}",
        f"client-name={_quote(settings.device_name())}",
    ]
    for item in shlex.split(settings.node_config):
        key, sep, _ = item.partition("=")
        if not sep or not key:
            raise ValueError(f"MOTS_EDGE_NODE_CONFIG: {item!r} is not a key=value pair")
    if settings.node_config.strip():
        pairs.append(settings.node_config.strip())
    return " ".join(pairs)


def supernode_argv(settings: AgentSettings) -> list[str]:
    """The ``flower-supernode`` command line (insecure transport: TLS terminates elsewhere)."""
    return [
        "flower-supernode",
        "--insecure",
        "--superlink",
        settings.superlink_address,
        "--node-config",
        node_config(settings),
        "--health-server-address",
        f"0.0.0.0:{settings.health_port}",
    ]


def exec_supernode(settings: AgentSettings) -> None:
    """Replace this process with the SuperNode (PID 1 in its container receives the signals)."""
    argv = supernode_argv(settings)
    exe = shutil.which(argv[0])
    if exe is None:
        raise FileNotFoundError("flower-supernode is not on PATH; install flwr==1.42.0")
    os.execv(exe, argv)


def _quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
