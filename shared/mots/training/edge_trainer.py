"""The edge device's resident trainer: PyTorch and the node's data partition loaded once.

Flower 1.42 starts a fresh ClientApp process for every message; importing torch there costs
about 1.3 s of CPU per client per round, more than the training itself. Each edge node therefore
runs this small server beside its SuperNode; the ClientApp (no torch) forwards the round's
weights over a Unix socket and returns the update. :func:`handle_train` is also what the ClientApp
runs in its own process when no trainer is configured.

Wire format of a frame: b"MOTS", u32 header length, JSON header, then the raw bytes of the arrays
the header lists (dtype, shape), in order. Run: ``python -m mots.training.edge_trainer --socket P``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import socket
import socketserver
import struct
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

MAGIC = b"MOTS"
FloatArray = npt.NDArray[np.float32]


class TrainerError(RuntimeError):
    """The trainer refused or failed a request; the message says why."""


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(min(n - len(buf), 1 << 20))
        if not chunk:
            raise TrainerError("connection closed mid-frame")
        buf.extend(chunk)
    return bytes(buf)


def send_frame(sock: socket.socket, header: dict[str, Any], arrays: list[FloatArray]) -> None:
    """Send one frame: header (JSON) plus arrays (raw bytes, listed in the header)."""
    arrs = [np.ascontiguousarray(a) for a in arrays]
    head = dict(header)
    head["arrays"] = [{"dtype": str(a.dtype), "shape": list(a.shape)} for a in arrs]
    raw = json.dumps(head).encode()
    sock.sendall(MAGIC + struct.pack("!I", len(raw)) + raw)
    for a in arrs:
        sock.sendall(a.tobytes())


def recv_frame(sock: socket.socket) -> tuple[dict[str, Any], list[FloatArray]]:
    """Receive one frame sent by :func:`send_frame`."""
    if _recv_exact(sock, 4) != MAGIC:
        raise TrainerError("bad frame: magic bytes differ")
    (n,) = struct.unpack("!I", _recv_exact(sock, 4))
    header = json.loads(_recv_exact(sock, n))
    arrays = []
    for spec in header.pop("arrays", []):
        dtype = np.dtype(spec["dtype"])
        shape = tuple(int(s) for s in spec["shape"])
        size = int(np.prod(shape)) * dtype.itemsize
        arrays.append(np.frombuffer(_recv_exact(sock, size), dtype=dtype).reshape(shape).copy())
    return header, arrays


class _State:
    """Per-process caches: the node's partition and a model to train, keyed by what shapes them,
    one of each per task (the slot; "" for the public set's partition): a device whose one
    SuperNode serves two tasks' runs at once gets their messages interleaved (issue 36), and
    keeps each task's data and model instead of reading them again at every switch."""

    def __init__(self) -> None:
        self.data: dict[str, tuple[str, Any]] = {}
        self.models: dict[str, tuple[str, Any]] = {}

    @staticmethod
    def get(cache: dict[str, tuple[str, Any]], slot: str, key: str) -> Any:
        """The slot's entry when it was made for ``key``, else None."""
        hit = cache.get(slot)
        return hit[1] if hit is not None and hit[0] == key else None


_STATE = _State()


def handle_train(
    request: dict[str, Any], weights: list[FloatArray]
) -> tuple[list[FloatArray], dict[str, Any]]:
    """One local update: request names config, type_index, client_index, round (and
    ``local_data``: the device's own folder, with the task's ``network`` to train); returns
    (new weights, {train_seconds, train_loss, num_examples, samples})."""
    from mots.training import datasets
    from mots.training.config import TrainConfig
    from mots.training.fedavg import learning_rate
    from mots.training.local import batch_indices, client_data, torch_threads, train_local
    from mots.training.models import build_model, set_weights
    from mots.training.partition import partition_id

    cfg = TrainConfig(**request["config"])
    i, j, r = int(request["type_index"]), int(request["client_index"]), int(request["round"])
    local = request.get("local_data")
    data_key = (
        _local_key(local)
        if local
        else json.dumps(
            [
                cfg.dataset,
                str(cfg.data_dir),
                cfg.partition,
                cfg.sizes,
                cfg.type_counts,
                cfg.type_classes,
                cfg.seed,
                i,
                j,
            ]
        )
    )
    slot = str(local["task"]) if local else ""
    data = _STATE.get(_STATE.data, slot, data_key)
    if data is None and local:
        data = _local_data(local, partition_id(i, j, cfg.type_counts))
        _STATE.data[slot] = (data_key, data)
    elif data is None:
        ds = datasets.load_dataset(cfg.dataset, cfg.data_dir)
        data = (client_data(cfg, i, j, ds), ds.input_shape, ds.num_classes)
        datasets._load_cached.cache_clear()  # keep only this node's partition in memory
        _STATE.data[slot] = (data_key, data)
    cd, shape, classes = data
    network = local.get("network") if local else None  # a task's architecture (issue 36)
    model_key = json.dumps([cfg.model, shape, classes, network], sort_keys=True)
    model = _STATE.get(_STATE.models, slot, model_key)
    if model is None and network:
        from mots.client.model_file import build_network

        model = build_network(network)
        _STATE.models[slot] = (model_key, model)
    elif model is None:
        c, h, w = (int(s) for s in shape)  # the training config's image models (C, H, W)
        model = build_model(cfg.model, (c, h, w), classes)
        _STATE.models[slot] = (model_key, model)
    with torch_threads(1):
        set_weights(model, weights)
        idx = batch_indices(cfg.seed, r, cd.pid, cd.size, cfg.local_steps, cfg.batch_size)
        res = train_local(model, cd, idx, learning_rate(cfg.lr, r))
        new = [
            v.detach().numpy().astype(np.float32, copy=True) for v in model.state_dict().values()
        ]
    return new, {
        "train_seconds": res.seconds,
        "train_loss": res.train_loss,
        "num_examples": cd.size,
        "samples": res.samples,
    }


def _local_key(local: dict[str, Any]) -> str:
    """What shapes a device's own data: its folder's files (name, size, mtime) and the task's
    data spec and D, so a changed folder is read and checked again."""
    folder = Path(str(local["path"]))
    files = (
        [(f.name, f.stat().st_size, f.stat().st_mtime_ns) for f in sorted(folder.iterdir())]
        if folder.is_dir()
        else []
    )
    return json.dumps([str(folder), files, local["spec"], local["min_samples"]], sort_keys=True)


def _local_data(local: dict[str, Any], pid: int) -> tuple[Any, tuple[int, ...], int]:
    """The device's own data for the task as a ClientData (partition id ``pid`` draws its
    mini-batches), its input shape and label count; refuses (LocalDataError, the check's verdict
    in plain words) a folder that does not fit the task or holds fewer samples than D."""
    import torch

    from mots.tasks.local_data import load_for_training
    from mots.tasks.task_file import DataSpec
    from mots.training.local import ClientData

    spec = DataSpec.model_validate(local["spec"])
    x, y = load_for_training(str(local["task"]), spec, local["path"], int(local["min_samples"]))
    return (
        ClientData(torch.from_numpy(x), torch.from_numpy(y), pid),
        spec.input_shape,
        len(spec.labels),
    )


def request_training(
    socket_path: str | Path,
    request: dict[str, Any],
    weights: list[FloatArray],
    timeout: float = 600.0,
) -> tuple[list[FloatArray], dict[str, Any]]:
    """Ask the resident trainer at ``socket_path`` for one local update (see :func:`handle_train`)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        try:
            s.connect(str(socket_path))
        except OSError as err:
            raise TrainerError(f"trainer-socket {socket_path}: cannot connect ({err})") from err
        send_frame(s, {"op": "train", **request}, weights)
        header, arrays = recv_frame(s)
    if "error" in header:
        raise TrainerError(f"trainer: {header['error']}")
    return arrays, header


def ping(socket_path: str | Path, timeout: float = 5.0) -> dict[str, Any]:
    """The trainer's pid and uptime; raises TrainerError when it does not answer."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        try:
            s.connect(str(socket_path))
            send_frame(s, {"op": "ping"}, [])
            header, _ = recv_frame(s)
        except OSError as err:
            raise TrainerError(f"trainer-socket {socket_path}: no answer ({err})") from err
    return header


class _Handler(socketserver.BaseRequestHandler):
    started = time.time()

    def handle(self) -> None:
        sock: socket.socket = self.request
        try:
            header, arrays = recv_frame(sock)
            op = header.get("op")
            if op == "ping":
                send_frame(sock, {"pid": os.getpid(), "uptime": time.time() - self.started}, [])
            elif op == "train":
                new, info = handle_train(header, arrays)
                send_frame(sock, info, new)
            else:
                send_frame(sock, {"error": f"op must be 'train' or 'ping', got {op!r}"}, [])
        except Exception as err:  # reply with the reason rather than drop the connection
            with contextlib.suppress(OSError):
                send_frame(sock, {"error": f"{type(err).__name__}: {err}"}, [])


def serve(
    socket_path: str | Path,
    preload: bool = True,
    handler: type[socketserver.BaseRequestHandler] = _Handler,
) -> None:
    """Serve requests on ``socket_path`` until SIGTERM/SIGINT; one request at a time (one client).

    The socket is bound under a temporary name and renamed into place once listening, so the
    path existing means the trainer accepts connections.
    """
    path = Path(socket_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    server: socketserver.UnixStreamServer | None = None

    def _stop(_sig: int, _frame: Any) -> None:
        if server is not None:
            server.server_close()
        path.unlink(missing_ok=True)
        sys.exit(0)

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    path.unlink(missing_ok=True)
    if preload:
        import torch  # noqa: F401 - pay the import once, before the first round

        from mots.training import local, models  # noqa: F401
    staging = path.with_name(f".{path.name}.{os.getpid()}")
    staging.unlink(missing_ok=True)
    server = socketserver.UnixStreamServer(str(staging), handler)
    staging.rename(path)
    try:
        server.serve_forever(poll_interval=0.5)
    finally:
        path.unlink(missing_ok=True)


def main(argv: list[str] | None = None) -> None:
    """``python -m mots.training.edge_trainer --socket PATH``."""
    p = argparse.ArgumentParser(description="MoTS edge trainer: local FedAvg updates for one node")
    p.add_argument("--socket", required=True, help="Unix socket path to listen on")
    p.add_argument("--no-preload", action="store_true", help="import torch on the first request")
    args = p.parse_args(argv)
    serve(args.socket, preload=not args.no_preload)


if __name__ == "__main__":
    main()
