"""Edge hosts on a network: each container its own address, its link shaped like a Pi on Wi-Fi.

Shaping is applied from the host on both ends of a container's veth: inside the container's
network namespace (its egress, the upload of an update) and on the host-side peer (its ingress,
the download of the global model), so the link is symmetric. ``tc netem`` does rate, delay,
jitter and loss where the kernel has it (CONFIG_NET_SCH_NETEM). This machine's kernel has no
netem (``tc`` answers "Specified qdisc kind is unknown"), so there the same figures are applied
with what it has: the rate by ``tbf`` on both ends, the loss by an iptables ``statistic`` rule on
each direction inside the container; delay and jitter are then not applied, and ``Link.applied``
says so (the report carries it). A cut drops every packet both ways with the interface up (a Pi
out of the access point's range: no RST); a restore puts the Wi-Fi shaping back. The tc, iptables
and nsenter binaries are the host's; the image needs none. Only this machine's containers are
ever shaped.
"""

from __future__ import annotations

import subprocess
import time
from dataclasses import asdict, dataclass

from tests.containers import podman

CHAIN = "MOTS-LINK"


@dataclass(frozen=True)
class Netem:
    """One direction of a shaped link (tc-netem's terms)."""

    rate_mbit: float
    delay_ms: float
    jitter_ms: float
    loss_pct: float

    def args(self) -> list[str]:
        """netem's arguments: normal-distributed jitter around the delay, random loss, a rate."""
        delay = [f"{self.delay_ms}ms", f"{self.jitter_ms}ms", "distribution", "normal"]
        return ["delay", *delay, "loss", f"{self.loss_pct}%", "rate", f"{self.rate_mbit}mbit"]


# A Raspberry Pi 4 on 2.4 GHz 802.11n, one spatial stream, a room or two from the access point:
# 20-40 Mbit/s of TCP goodput is what such a link gives in practice (its 72 Mbit/s PHY rate
# halves under contention), a few ms of air time plus queueing with several ms of jitter, and
# loss under 1 % after the MAC's retries. The low end of each is taken, so a round passing here
# has margin on a better link: 20 Mbit/s, 10 ms +- 5 ms each way (~20 ms RTT), 0.5 % loss.
PI_WIFI = Netem(rate_mbit=20, delay_ms=10, jitter_ms=5, loss_pct=0.5)
WHY = (
    "Raspberry Pi 4 on 2.4 GHz 802.11n (one stream, some contention): 20-40 Mbit/s TCP goodput, "
    "a few ms air time + queueing with jitter, <1 % loss after MAC retries; the low end taken"
)


def _run(cmd: list[str], check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=30, check=False)
    if check and proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {proc.stderr.strip()}")
    return proc


def _pid(container: str) -> str:
    return podman.podman("inspect", "--format", "{{.State.Pid}}", container).stdout.strip()


def _in(container: str) -> list[str]:
    return ["nsenter", "-t", _pid(container), "-n"]


def host_veth(container: str) -> str:
    """The host-side veth peer of the container's eth0 (``eth0@ifN`` inside names its index).

    Read with ``ip`` inside the namespace: /sys/class/net would be the host's sysfs (nsenter -n
    keeps the mount namespace). Anything but a veth is refused, so the host's own interfaces
    are never shaped.
    """
    line = _run([*_in(container), "ip", "-o", "link", "show", "eth0"]).stdout
    peer = line.split(":", 2)[1].strip().partition("@if")[2]
    if not peer.isdigit():
        raise RuntimeError(f"{container}: eth0 is not a veth ({line.strip()})")
    for row in _run(["ip", "-o", "link"]).stdout.splitlines():
        idx, name = row.split(":", 2)[:2]
        name = name.strip().split("@")[0]
        if idx.strip() == peer:
            if not name.startswith("veth"):
                raise RuntimeError(f"{container}: peer {name} is not a veth; refusing to shape it")
            return name
    raise RuntimeError(f"{container}: no host interface with ifindex {peer}")


def has_netem(container: str) -> bool:
    """Whether the kernel runs netem (tried on the container's loopback, then removed)."""
    probe = _run([*_in(container), "tc", "qdisc", "add", "dev", "lo", "root", "netem"], False)
    if probe.returncode == 0:
        _run([*_in(container), "tc", "qdisc", "del", "dev", "lo", "root"], False)
    return probe.returncode == 0


def _qdisc(container: str, args: list[str]) -> None:
    _run([*_in(container), "tc", "qdisc", "replace", "dev", "eth0", "root", *args])
    _run(["tc", "qdisc", "replace", "dev", host_veth(container), "root", *args])


def _rules(container: str, rules: list[list[str]]) -> None:
    """Replace the container's MOTS-LINK chain (jumped to from INPUT and OUTPUT) with ``rules``."""
    ipt = [*_in(container), "iptables", "-w"]
    if _run([*ipt, "-nL", CHAIN], False).returncode != 0:
        _run([*ipt, "-N", CHAIN])
        _run([*ipt, "-I", "INPUT", "-j", CHAIN])
        _run([*ipt, "-I", "OUTPUT", "-j", CHAIN])
    _run([*ipt, "-F", CHAIN])
    for rule in rules:
        _run([*ipt, "-A", CHAIN, *rule])


def shape(container: str, link: Netem = PI_WIFI) -> dict[str, object]:
    """Shape both ends of the container's link; return what was applied and how."""
    if has_netem(container):
        _qdisc(container, ["netem", *link.args()])
        _rules(container, [])
        how: dict[str, str | None] = {"rate": "netem", "delay": "netem", "jitter": "netem"}
        how["loss"] = "netem"
    else:
        burst = max(16, int(link.rate_mbit * 1000 / 8 / 100))  # ~10 ms of traffic, in kB
        _qdisc(container, ["tbf", "rate", f"{link.rate_mbit}mbit", "burst", f"{burst}kb",
                           "latency", "100ms"])  # fmt: skip
        p = f"{link.loss_pct / 100:.6f}"
        _rules(container, [["-m", "statistic", "--mode", "random", "--probability", p,
                            "-j", "DROP"]])  # fmt: skip
        how = {"rate": "tbf", "delay": None, "jitter": None, "loss": "iptables statistic"}
    return {**asdict(link), "why": WHY, "applied": how}


def qdisc(container: str) -> str:
    """What `tc qdisc show` reports for the container's eth0, for checks."""
    return _run([*_in(container), "tc", "qdisc", "show", "dev", "eth0"]).stdout


def cut(container: str) -> None:
    """Cut the container off: every packet dropped both ways, the interface left up."""
    _rules(container, [["-j", "DROP"]])


def restore(container: str, link: Netem = PI_WIFI) -> None:
    """Put the Wi-Fi shaping back after a cut."""
    shape(container, link)


PROBE = """
import socket, statistics, sys, time, urllib.request
host = sys.argv[1]
rtts = []
for _ in range(15):
    t = time.perf_counter()
    try:
        socket.create_connection((host, 8000), timeout=3).close()
        rtts.append((time.perf_counter() - t) * 1000)
    except OSError:
        pass
if not rtts:
    print("unreachable"); sys.exit(0)
t = time.perf_counter()
n = len(urllib.request.urlopen(f"http://{host}:8000/blob", timeout=60).read())
print(statistics.median(rtts), n * 8 / 1e6 / (time.perf_counter() - t))
"""
SERVE = (
    "open('/tmp/blob', 'wb').write(bytes(4 * 2**20)); import os; os.chdir('/tmp'); "
    "import http.server as h; h.ThreadingHTTPServer(('', 8000), h.SimpleHTTPRequestHandler)"
    ".serve_forever()"
)


def probe(edge: str, server: str) -> tuple[float, float] | None:
    """(median TCP connect ms, download Mbit/s) from ``edge`` to ``server``; None if cut off."""
    out = podman.podman("exec", edge, "python", "-c", PROBE, server, timeout=120).stdout.split()
    return None if out == ["unreachable"] else (float(out[0]), float(out[1]))


def measure(image: str, prefix: str = "mots-net") -> dict[str, object]:
    """The report's ``network.netem``: two containers on a network of their own, the link
    measured free, shaped, cut and restored; everything removed afterwards."""
    server, edge = f"{prefix}-server", f"{prefix}-edge"
    try:
        podman.podman("network", "create", prefix)
        for name, cmd in ((server, ["python", "-c", SERVE]), (edge, ["sleep", "600"])):
            args = podman.run_args("-d", "--name", name, "--network", prefix, image, *cmd)
            subprocess.run(args, env=podman.env(), check=True, capture_output=True, timeout=120)
        time.sleep(1)
        free = probe(edge, server)
        facts = shape(edge, PI_WIFI)
        shaped = probe(edge, server)
        cut(edge)
        during_cut = probe(edge, server)
        restore(edge)
        back = probe(edge, server)
    finally:
        podman.remove([prefix])
    return facts | {
        "measured_free": free,
        "measured_shaped": shaped,
        "reachable_while_cut": during_cut is not None,
        "measured_restored": back,
        "units": "(median TCP connect ms, download Mbit/s)",
    }
