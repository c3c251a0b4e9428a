#!/usr/bin/env bash
# Cut from the edge image's venv what a Pi never runs (issue 39: the arm64 edge image at most
# 600 MiB). docker/edge/Dockerfile runs it at the end of each pip RUN, in that same RUN, so that
# what it deletes never lands in a layer (a delete in a later RUN would not shrink the image).
# Each such RUN first touches /tmp/.slim-start and bootstraps pip with ensurepip (the venv is
# made --without-pip); this script removes pip again.
#
#   slim.sh torch   after `pip install torch`: torch's C++ headers, CMake files and protoc (only
#                   C++ extensions and torch.compile's codegen use them), and torch's sympy, mpmath
#                   and networkx (only torch.compile, torch.fx's shape solving and torch.export
#                   import them; `import torch` and a training step do not)
#   slim.sh deps    after the project's requirements: the test suites packages ship, type stubs,
#                   the uv binary (flwr's runtime `uv sync`, which the warm node refuses:
#                   mots.training.warm_node) and uvicorn's optional speedups (uvloop, watchfiles,
#                   httptools, websockets: only a SuperLink's HTTP server would use them)
#   both            the symbol tables of the shared libraries installed (strip_libs), pip and
#                   setuptools (nothing installs on a Pi at run time), and the bytecode of
#                   modules the edge never imports (see prune below)
#
# What stays was checked by importing, with every removed package blocked, the agent, its health
# check, the warm node, the SuperNode's start path, the ClientApp and a training step
# (tests/docker/test_edge_slim.py); the arm64 round of `make deploy-test` trains on the result.
set -euo pipefail

SITE=$(python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
VENV_BIN=$(dirname "$(command -v python)")
MARK=/tmp/.slim-start

# Bytecode only for what the edge loads: import what its processes import and delete every other
# .pyc written in this RUN (newer than $MARK; older ones are in an earlier layer). A module this
# misses still imports, compiled in memory: a .pyc is a cache, never needed for correctness.
prune() {
  python - "$SITE" "$MARK" "$1" <<'PY'
import os, pathlib, sys
import torch, torch.nn.functional as F
site, mark, step = pathlib.Path(sys.argv[1]), os.stat(sys.argv[2]).st_mtime, sys.argv[3]
if step == "deps":
    import numpy, grpc, httpx, pydantic, pydantic_settings, yaml, click, rich, typer
    import cryptography, grpc_health.v1.health_pb2_grpc, sqlalchemy
    import flwr.app, flwr.clientapp, flwr.cli.install, flwr.supernode.cli
    import flwr.supernode.start_client_internal, flwr.supernode.runtime.run_clientapp
    import flwr.supercore.object_store.object_store_factory, flwr.supercore.superexec.plugin
    import flwr.supercore.heartbeat, flwr.supercore.runtime, flwr.supercore.retry
# a training step as mots.training.local.train_local takes it (autograd.grad and an in-place
# update: no torch.optim, whose param groups import torch._dynamo and with it sympy)
model = torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3), torch.nn.ReLU(), torch.nn.Flatten(),
                            torch.nn.Linear(4 * 26 * 26, 10))
params = list(model.parameters())
x, y = torch.randn(8, 1, 28, 28), torch.randint(0, 10, (8,))
grads = torch.autograd.grad(F.cross_entropy(model(x), y), params)
with torch.no_grad():
    for p, g in zip(params, grads):
        p.add_(g, alpha=-0.1)
loaded = {pathlib.Path(c).resolve() for m in list(sys.modules.values())
          if isinstance(c := getattr(m, "__cached__", None), str)}
cut = [p for p in site.rglob("*.pyc") if p.resolve() not in loaded and p.stat().st_mtime >= mark]
freed = sum(p.stat().st_size for p in cut)
for p in cut:
    p.unlink()
print(f"slim.sh {step}: {len(loaded)} modules loaded; deleted {len(cut)} other .pyc "
      f"({freed / 2**20:.1f} MiB)")
PY
}

# The symbol tables of every shared library this RUN installed (strip --strip-unneeded: the
# dynamic symbols the loader and Python's import need stay), with Debian's binutils installed for
# this RUN only and purged after.
strip_libs() {
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends binutils >/dev/null
  # not the libraries auditwheel vendored into *.libs/: patchelf rewrote their headers, and
  # strip left numpy.libs' OpenBLAS unloadable ("ELF load command address/offset not
  # page-aligned"), so they stay as shipped
  find "$SITE" -name '*.so*' -type f -newer "$MARK" -not -path '*.libs/*' \
    -exec strip --strip-unneeded {} +
  apt-get purge -y -qq --auto-remove binutils >/dev/null
  rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/cache/apt/archives/*.deb /var/log/apt \
    /var/log/dpkg.log
}

case "${1:?torch or deps}" in
  torch)
    rm -rf "$SITE/torch/include" "$SITE/torch/share/cmake" "$SITE"/torch/bin/protoc*
    pip uninstall --yes --quiet sympy mpmath networkx
    ;;
  deps)
    pip uninstall --yes --quiet uvloop watchfiles httptools websockets
    rm -f "$VENV_BIN/uv" "$VENV_BIN/uvx"
    # only what this RUN installed (newer than $MARK): torch's layer is already written
    find "$SITE" -type d -name tests -newer "$MARK" -prune -exec rm -rf {} +
    find "$SITE" -name '*.pyi' -type f -newer "$MARK" -delete
    ;;
  *)
    echo "slim.sh: unknown step $1 (torch or deps)" >&2
    exit 2
    ;;
esac
strip_libs
python -m pip uninstall --yes --quiet pip setuptools
prune "$1"
rm -f "$MARK"
