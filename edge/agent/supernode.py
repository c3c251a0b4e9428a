"""Starting the Flower SuperNode: TLS to the SuperLink and this device's own key.

The SuperNode runs in the warm node (:mod:`mots.training.warm_node`): one process that is the
SuperNode and its SuperExec, whose executor runs every ClientApp task on a thread that has Flower,
torch and the ClientApp's code loaded since the start (no process, import or FAB load per round).

The device's key pair (``MOTS_EDGE_NODE_KEY``) is made on the device on its first start and the
private key never leaves it; the SuperLink admits the node only once the platform registered the
public key (``python -m edge.agent node-key`` prints it), and the ServerApp knows the node as the
participant that key belongs to. The SuperLink's certificate is verified with the CA certificate
``MOTS_EDGE_ROOT_CERTIFICATES``.

The ClientApp (edge/flower_app) reads ``client-type`` and ``client-index`` (which data partition
the device holds, mots.training.flower_messages.node_identity) and ``data-dir`` (the public set,
for a device without ``--data``); ``client-name``
labels the node in logs; ``MOTS_EDGE_NODE_CONFIG`` appends further pairs. ``--data TASK=PATH``
(the device's own data folder per task) reaches the ClientApp as ``data-<task>``, the warm node
adding it to the node config (:func:`mots.training.task_data.with_task_data`). None of these tell the
platform who the node is.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys

from edge.agent.settings import AgentSettings


def node_config(settings: AgentSettings, own_data: bool = False) -> str:
    """The ``--node-config`` string: strings quoted, numbers bare, extra pairs appended.

    ``own_data``: the device names its own folders (``--data``), so it holds no public set: no
    ``data-dir``, and its index within its type (which then only seeds the batch order) is 0 when
    neither MOTS_EDGE_CLIENT_INDEX nor a ``client-index`` file says otherwise."""
    index = client_index(settings, default=0 if own_data else None)
    pairs = [f"client-type={_quote(settings.client_type)}", f"client-index={index}"]
    if not own_data:
        pairs.append(f"data-dir={_quote(str(settings.data_dir))}")
    pairs.append(f"client-name={_quote(settings.device_name())}")
    for item in shlex.split(settings.node_config):
        key, sep, _ = item.partition("=")
        if not sep or not key:
            raise ValueError(f"MOTS_EDGE_NODE_CONFIG: {item!r} is not a key=value pair")
    if settings.node_config.strip():
        pairs.append(settings.node_config.strip())
    return " ".join(pairs)


def client_index(settings: AgentSettings, default: int | None = None) -> int:
    """MOTS_EDGE_CLIENT_INDEX, else the integer in ``<data_dir>/client-index`` (set up per Pi),
    else ``default`` when one is given (a device of its own data: no public set to slice)."""
    if settings.client_index is not None:
        return settings.client_index
    path = settings.data_dir / "client-index"
    try:
        text = path.read_text().strip()
    except OSError as exc:
        if default is not None:
            return default
        raise ValueError(
            f"MOTS_EDGE_CLIENT_INDEX is unset and {path} cannot be read ({exc.strerror}); "
            "set one of them to this device's index within its type (0, 1, …)"
        ) from exc
    if not text.isdigit():
        raise ValueError(
            f"{path}: must hold an integer ≥ 0 (the index within the type), got {text!r}"
        )
    return int(text)


def supernode_argv(settings: AgentSettings, data: dict[str, str] | None = None) -> list[str]:
    """The edge node's command line: Flower's SuperNode in the warm node (one process: the
    SuperNode and a warm executor that keeps torch and the ClientApp loaded between rounds,
    :mod:`mots.training.warm_node`), TLS verified by the CA, requests signed by the device's key."""
    return [
        sys.executable,
        "-m",
        "mots.training.warm_node",
        "--superlink",
        settings.superlink_address,
        "--root-certificates",
        str(settings.root_certificates),
        "--auth-supernode-private-key",
        str(settings.node_key_path()),
        "--node-config",
        node_config(settings, own_data=bool(data)),
        "--health-server-address",
        f"0.0.0.0:{settings.health_port}",
        *(arg for task, path in (data or {}).items() for arg in ("--data", f"{task}={path}")),
    ]


def node_public_key(settings: AgentSettings) -> bytes:
    """This device's public key (PEM), the key pair made first if the device has none."""
    from mots.training.pki import ensure_node_key

    return ensure_node_key(settings.node_key_path()).public_pem


def exec_supernode(settings: AgentSettings, data: dict[str, str] | None = None) -> None:
    """Replace this process with the SuperNode (PID 1 in its container receives the signals),
    after making the device's key pair on its first start."""
    if not settings.root_certificates.is_file():
        raise FileNotFoundError(
            f"MOTS_EDGE_ROOT_CERTIFICATES: {settings.root_certificates} is missing (the "
            "SuperLink's CA certificate; see the README)"
        )
    node_public_key(settings)
    if shutil.which("flower-supernode") is None:
        raise FileNotFoundError("flower-supernode is not on PATH; install flwr==1.42.0")
    argv = supernode_argv(settings, data)
    os.execv(argv[0], argv)


def _quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
