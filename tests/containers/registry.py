"""Images to the devices through a registry (issue 39): a real one, Debian's `docker-registry`
(the CNCF distribution registry), behind TLS with its own CA and htpasswd credentials, as the Pis'
k3s would reach it.

``make images`` pushes every image for amd64 and the edge as a manifest list of amd64 and arm64
(one digest both kinds of node resolve), writes the overlay pinned by those digests
(``pinned_overlay``: a generated kustomization over k8s/overlays/k3s-pi, never hand-edited
digests) and the nodes' ``/etc/rancher/k3s/registries.yaml`` from
k8s/overlays/k3s-pi/registries.yaml.template. It then pulls the arm64 edge by digest into an empty
store with exactly what that registries.yaml gives a Pi's containerd (the CA file, the user and
password), through a network namespace whose link is shaped to 20 Mbit/s (``tc tbf`` on both
ends), and times it.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import json
import secrets
import shutil
import socket
import ssl
import string
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tests.containers import podman
from tests.containers.base import ROOT

OVERLAY = ROOT / "k8s" / "overlays" / "k3s-pi"
TEMPLATE = OVERLAY / "registries.yaml.template"
# What the overlay names the images (its kustomization's `images:` newName), which the pinned
# overlay replaces by the registry's name and a digest.
SHIPPED = "registry.example.org/mots"
USER = "mots-node"
# The shaped link a pull crosses: a host-side veth, its peer in a namespace of its own.
NETNS, HOST_IF, NS_IF = "mots-reg-ns", "mots-reg-h", "mots-reg-n"
HOST_IP, NS_IP = "10.213.39.1", "10.213.39.2"


@dataclass
class Registry:
    """A running registry: where it listens, its CA, the one user's password, its process."""

    host: str
    port: int
    ca: Path
    password: str
    workdir: Path
    proc: subprocess.Popen[bytes]

    @property
    def address(self) -> str:
        """host:port, as image references name it."""
        return f"{self.host}:{self.port}"


def _free_port(host: str) -> int:
    """A TCP port nothing listens on at ``host`` now."""
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def make_certs(workdir: Path, ips: list[str]) -> tuple[Path, Path, Path]:
    """A CA and a server certificate it signs for ``ips`` (and localhost): (ca.crt, server.crt,
    server.key). The CA is what every node's registries.yaml names as ca_file."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = dt.datetime.now(dt.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "MoTS registry CA")])
    ca = (
        x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
        .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + dt.timedelta(days=2))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .sign(ca_key, hashes.SHA256())
    )  # fmt: skip
    key = ec.generate_private_key(ec.SECP256R1())
    sans: list[x509.GeneralName] = [x509.DNSName("localhost")]
    sans += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ips]
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "mots-registry")]))
        .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + dt.timedelta(days=2))
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .sign(ca_key, hashes.SHA256())
    )  # fmt: skip
    paths = (workdir / "ca.crt", workdir / "server.crt", workdir / "server.key")
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return paths


def start(workdir: Path, host: str = "127.0.0.1", timeout: float = 30) -> Registry:
    """Start docker-registry on a free port of ``host`` behind TLS (its own CA) and htpasswd
    (bcrypt, the only hash it takes) with one user; return once /v2/ answers 401 unauthenticated."""
    binary = shutil.which("docker-registry")
    if binary is None:
        raise RuntimeError("docker-registry is not installed (apt-get install docker-registry)")
    workdir.mkdir(parents=True, exist_ok=True)
    ca, crt, key = make_certs(workdir, sorted({host, "127.0.0.1", HOST_IP}))
    password = secrets.token_urlsafe(18)
    htpasswd = subprocess.run(
        ["htpasswd", "-Bbn", USER, password], capture_output=True, text=True, check=True
    ).stdout
    (workdir / "htpasswd").write_text(htpasswd)
    port = _free_port(host)
    config = {
        "version": 0.1,
        "log": {"level": "warn"},
        "storage": {"filesystem": {"rootdirectory": str(workdir / "data")}},
        "http": {"addr": f"{host}:{port}", "tls": {"certificate": str(crt), "key": str(key)}},
        "auth": {"htpasswd": {"realm": "mots", "path": str(workdir / "htpasswd")}},
    }
    (workdir / "config.yml").write_text(yaml.safe_dump(config))
    log = (workdir / "registry.log").open("wb")
    proc = subprocess.Popen([binary, "serve", str(workdir / "config.yml")], stdout=log, stderr=log)
    reg = Registry(host, port, ca, password, workdir, proc)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if status(reg) == 401:
            return reg
        if proc.poll() is not None:
            break
        time.sleep(0.2)
    stop(reg)
    raise RuntimeError(f"registry did not start: {(workdir / 'registry.log').read_text()[-800:]}")


def status(reg: Registry, user: str | None = None, password: str | None = None) -> int | None:
    """The HTTP status of GET /v2/ over TLS verified with the registry's CA (None: no answer)."""
    request = urllib.request.Request(f"https://{reg.address}/v2/")
    if user is not None:
        import base64

        token = base64.b64encode(f"{user}:{password}".encode()).decode()
        request.add_header("Authorization", f"Basic {token}")
    context = ssl.create_default_context(cafile=str(reg.ca))
    try:
        with urllib.request.urlopen(request, timeout=3, context=context) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as err:
        return int(err.code)
    except OSError:
        return None


def stop(reg: Registry) -> None:
    """Stop the registry process (its storage stays in workdir until the caller removes it)."""
    if reg.proc.poll() is None:
        reg.proc.terminate()
        try:
            reg.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            reg.proc.kill()
            reg.proc.wait(timeout=10)


def render_registries_yaml(address: str, password: str, ca_file: str) -> str:
    """k8s/overlays/k3s-pi/registries.yaml.template filled in: a node's
    /etc/rancher/k3s/registries.yaml for the registry at ``address``."""
    text = string.Template(TEMPLATE.read_text()).substitute(
        REGISTRY=address, REGISTRY_USER=USER, REGISTRY_PASSWORD=password, REGISTRY_CA=ca_file
    )
    return text


def client_options(registries_yaml: str, address: str, certs: Path) -> list[str]:
    """What a registries.yaml gives containerd for ``address``, as podman's options: the CA file
    (copied into ``certs`` as its --cert-dir wants) and the user and password. Raises KeyError
    when the file says nothing for that registry, so a wrong template fails the pull."""
    config = yaml.safe_load(registries_yaml)["configs"][address]
    certs.mkdir(parents=True, exist_ok=True)
    shutil.copy(config["tls"]["ca_file"], certs / "ca.crt")
    auth = config["auth"]
    return ["--cert-dir", str(certs), "--creds", f"{auth['username']}:{auth['password']}"]


def push(ref: str, dest: str, options: list[str], digestfile: Path) -> str:
    """podman push of a local image to ``dest`` (docker v2 schema 2, as k3s pulls it); its digest."""
    podman.podman("push", "--quiet", "--format", "v2s2", *options, "--digestfile",
                  str(digestfile), ref, f"docker://{dest}", timeout=1800)  # fmt: skip
    return digestfile.read_text().strip()


def push_list(refs: list[str], dest: str, options: list[str], digestfile: Path) -> str:
    """One manifest list of the local images ``refs`` (one per architecture) pushed to ``dest``
    with every instance; its digest, which nodes of either architecture resolve."""
    name = f"localhost/mots-reg-list/{dest.rsplit('/', 1)[-1].replace(':', '-')}"
    podman.podman("manifest", "rm", name, check=False)
    podman.podman("manifest", "create", name)
    try:
        for ref in refs:
            podman.podman("manifest", "add", name, f"containers-storage:{ref}")
        podman.podman("manifest", "push", "--all", "--quiet", "--format", "v2s2", *options,
                      "--digestfile", str(digestfile), name, f"docker://{dest}",
                      timeout=1800)  # fmt: skip
    finally:
        podman.podman("manifest", "rm", name, check=False)
    return digestfile.read_text().strip()


def pinned_overlay(out: Path, address: str, digests: dict[str, str]) -> Path:
    """Write ``out``/kustomization.yaml: k8s/overlays/k3s-pi with every image the overlay names
    replaced by ``address``/mots/NAME@DIGEST (``digests``: NAME -> sha256:...). Generated at each
    push; `kubectl apply -k` on it deploys exactly the pushed images."""
    out.mkdir(parents=True, exist_ok=True)
    overlay = Path(*[".."] * len(out.resolve().relative_to(ROOT).parts)) / OVERLAY.relative_to(ROOT)
    doc: dict[str, Any] = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": [str(overlay)],
        "images": [
            {"name": f"{SHIPPED}/{name}", "newName": f"{address}/mots/{name}", "digest": digest}
            for name, digest in sorted(digests.items())
        ],
    }
    path = out / "kustomization.yaml"
    head = "# Generated by `make images` (tests/containers/registry.py): do not edit.\n"
    path.write_text(head + yaml.safe_dump(doc, sort_keys=False))
    return path


def _sh(*cmd: str) -> None:
    subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=30)


def shaped_link(rate_mbit: float = 20) -> None:
    """A network namespace (NETNS, NS_IP) joined to the host (HOST_IP) by a veth, its rate
    limited by tbf on both ends (netem is missing from this machine's kernel: no delay)."""
    unshape_link()
    _sh("ip", "netns", "add", NETNS)
    _sh("ip", "link", "add", HOST_IF, "type", "veth", "peer", "name", NS_IF)
    _sh("ip", "link", "set", NS_IF, "netns", NETNS)
    _sh("ip", "addr", "add", f"{HOST_IP}/30", "dev", HOST_IF)
    _sh("ip", "link", "set", HOST_IF, "up")
    _sh("ip", "-n", NETNS, "addr", "add", f"{NS_IP}/30", "dev", NS_IF)
    _sh("ip", "-n", NETNS, "link", "set", NS_IF, "up")
    _sh("ip", "-n", NETNS, "link", "set", "lo", "up")
    burst = f"{max(16, int(rate_mbit * 1000 / 8 / 100))}kb"
    tbf = ["tbf", "rate", f"{rate_mbit}mbit", "burst", burst, "latency", "100ms"]
    _sh("tc", "qdisc", "replace", "dev", HOST_IF, "root", *tbf)
    _sh("ip", "netns", "exec", NETNS, "tc", "qdisc", "replace", "dev", NS_IF, "root", *tbf)


def unshape_link() -> None:
    """Remove the namespace and its veth (either may be absent)."""
    subprocess.run(["ip", "link", "del", HOST_IF], capture_output=True, check=False)
    subprocess.run(["ip", "netns", "del", NETNS], capture_output=True, check=False)


def pull(
    ref: str, arch: str, options: list[str], store: Path, netns: str | None = None
) -> dict[str, Any]:
    """Pull ``ref`` (by digest) for ``arch`` into the empty store ``store`` (so every layer
    crosses the link, as on a fresh Pi), inside ``netns`` when given; seconds, arch, digest."""
    shutil.rmtree(store, ignore_errors=True)
    root = ["--root", str(store / "root"), "--runroot", str(store / "run")]
    cmd = ["podman", *podman.FLAGS, *root, "pull", "--quiet", "--arch", arch, *options, ref]
    if netns:
        cmd = ["ip", "netns", "exec", netns, *cmd]
    started = time.monotonic()
    proc = subprocess.run(cmd, env=podman.env(), capture_output=True, text=True, timeout=3600)
    seconds = round(time.monotonic() - started, 1)
    if proc.returncode != 0:
        raise podman.PodmanError(f"pull {ref}: {proc.stderr[-1500:]}")
    inspect = subprocess.run(
        ["podman", *podman.FLAGS, *root, "image", "inspect", ref],
        env=podman.env(), capture_output=True, text=True, check=True, timeout=120,
    )  # fmt: skip
    info = json.loads(inspect.stdout)[0]
    return {"seconds": seconds, "arch": info["Architecture"], "repo_digests": info["RepoDigests"],
            "size_mib": round(info["Size"] / 2**20, 1)}  # fmt: skip


def overlay_images() -> dict[str, str]:
    """NAME -> the reference the shipped overlay runs (registry.example.org/mots/NAME:TAG)."""
    doc = yaml.safe_load((OVERLAY / "kustomization.yaml").read_text())
    return {
        i["newName"].rsplit("/", 1)[-1]: f"{i['newName']}:{i['newTag']}"
        for i in doc["images"]
        if i["newName"].startswith(SHIPPED + "/")
    }


def pinned_refs(directory: Path) -> list[str]:
    """Every container image the kustomization in ``directory`` renders (kubectl kustomize)."""
    from tests.deploy.kustomize import render

    refs = []
    for res in render(directory):
        spec = res.get("spec", {})
        spec = spec.get("template", {}).get("spec", spec)
        spec = spec.get("jobTemplate", {}).get("spec", {}).get("template", {}).get("spec", spec)
        for c in [*spec.get("initContainers", []), *spec.get("containers", [])]:
            refs.append(c["image"])
    return refs


def part(out: Path, local: dict[str, dict[str, str]]) -> dict[str, Any]:
    """The report's ``registry``: start the registry, push ``local`` (NAME -> {arch: local
    image}; several arches become one manifest list), write the pinned overlay and the nodes'
    registries.yaml under ``out``, and pull the arm64 edge by digest over the 20 Mbit/s link
    with what that registries.yaml says, into an empty store."""
    workdir = out / "registry"
    shutil.rmtree(workdir, ignore_errors=True)
    shaped_link(20)
    reg = start(workdir / "server", host=HOST_IP)
    try:
        rendered = render_registries_yaml(reg.address, reg.password, str(reg.ca))
        (workdir / "registries.yaml").write_text(rendered)
        options = client_options(rendered, reg.address, workdir / "certs")
        auth = {"anonymous": status(reg), "wrong_password": status(reg, USER, "not-it"),
                "registries_yaml": status(reg, USER, reg.password)}  # fmt: skip
        digests: dict[str, str] = {}
        for name, by_arch in sorted(local.items()):
            dest = f"{reg.address}/mots/{name}:{overlay_images()[name].rsplit(':', 1)[1]}"
            digestfile = workdir / f"{name}.digest"
            if len(by_arch) == 1:
                digests[name] = push(next(iter(by_arch.values())), dest, options, digestfile)
            else:
                digests[name] = push_list(list(by_arch.values()), dest, options, digestfile)
        pinned = pinned_overlay(out / "pinned", reg.address, digests)
        refs = [r for r in pinned_refs(pinned.parent) if "/mots/" in r]
        want = {f"{reg.address}/mots/{n}@{d}" for n, d in digests.items()}
        edge = f"{reg.address}/mots/edge@{digests['edge']}"
        pulled = pull(edge, "arm64", options, workdir / "store", netns=NETNS)
    finally:
        stop(reg)
        unshape_link()
        shutil.rmtree(workdir / "store", ignore_errors=True)
        shutil.rmtree(workdir / "server" / "data", ignore_errors=True)
    by_digest = pulled["arch"] == "arm64" and edge in pulled["repo_digests"]
    by_digest = by_digest and auth == {"anonymous": 401, "wrong_password": 401,
                                       "registries_yaml": 200}  # fmt: skip
    return {
        "pushed": digests,
        "pulled_by_digest": by_digest,
        "pull_s_20mbit": pulled["seconds"],
        "pull": pulled | {"ref": edge, "link": "20 Mbit/s, tc tbf both ends (no netem here)"},
        "overlay_pinned": bool(refs) and set(refs) <= want,
        "overlay_images": sorted(set(refs)),
        "pinned_overlay": str(pinned),
        "registries_yaml": str(workdir / "registries.yaml"),
        "auth": auth,
    }
