"""Issue 39, deliverable 2: deploy/ansible/pi.yml run against containers standing for fresh
Raspberry Pis (tests/containers/standins/raspberry-pi-os, amd64 and arm64 under QEMU), twice: the
first run changes what it must, the second changes nothing (changed=0); then testinfra checks what
is on each "Pi". The report's key: provision{first_changed, second_changed, hosts, checks}.

What a container cannot do, and how the check handles it (the playbook's variables, stated here):
- reboot for the boot flags: mots_reboot=false (the handler is skipped; the flags are checked in
  cmdline.txt, not in a running kernel);
- start timesyncd and the k3s agent: systemd is not PID 1 in the container, so the playbook only
  enables the units (mots_start_services=false as well); no k3s runs: its binary is a stub script;
- the registry's CA and k3s' airgap tarball are small stand-in files (the playbook copies bytes).

Every podman call (ours, Ansible's podman connection and testinfra's) goes through a `podman`
wrapper that holds /tmp/podman.lock for that one command; run the whole part under the lock
instead with `flock /tmp/podman.lock env MOTS_PODMAN_LOCK_HELD=1 python -m tests.containers.run
--parts provision` (its base check and cleanup call podman outside the wrapper).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from tests.containers import podman
from tests.containers.base import ROOT, ensure_base

PLAYBOOK = ROOT / "deploy" / "ansible" / "pi.yml"
STANDIN = Path(__file__).with_name("standins") / "raspberry-pi-os"
DAEMONSET = ROOT / "k8s" / "overlays" / "k3s-pi" / "edge" / "supernode" / "daemonset.yaml"
PREFIX = "mots-pv"
ARCHES = ("amd64", "arm64")
TASKS = ["fashion-mnist", "digits"]
LOCK = "/tmp/podman.lock"
# What the playbook wrote before tasks existed (the public-slice model); it removes it now.
FORMER_INDEX = "/var/lib/mots/data/client-index"
RECAP = re.compile(
    r"^(\S+)\s*:\s*ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", re.M
)


def recap(output: str) -> dict[str, dict[str, int]]:
    """Per host, ok/changed/unreachable/failed from ansible-playbook's PLAY RECAP."""
    keys = ("ok", "changed", "unreachable", "failed")
    return {
        m[1]: dict(zip(keys, map(int, m.groups()[1:]), strict=True)) for m in RECAP.finditer(output)
    }


def wrapper(bindir: Path) -> Path:
    """A `podman` first on PATH that runs the real one with this host's flags under the lock,
    or without taking it when MOTS_PODMAN_LOCK_HELD is set: the whole part already runs under
    `flock /tmp/podman.lock` (a second flock on the same file from a child would wait forever)."""
    real = subprocess.run(["sh", "-c", "command -v podman"], capture_output=True, text=True)
    exe = f'{real.stdout.strip() or "/usr/bin/podman"} {" ".join(podman.FLAGS)} "$@"'
    path = bindir / "podman"
    path.write_text(
        f'#!/bin/sh\n[ -n "$MOTS_PODMAN_LOCK_HELD" ] && exec {exe}\nexec flock {LOCK} {exe}\n'
    )
    path.chmod(0o755)
    return path


def inventory(work: Path, exe: Path) -> Path:
    """The test's inventory: one stand-in Pi per architecture, a type-1 and a type-2, each with a
    data folder per task of TASKS."""
    (work / "k3s").write_text("#!/bin/sh\necho 'k3s stand-in (tests/containers/provision.py)'\n")
    (work / "registry-ca.crt").write_text("stand-in CA certificate (the playbook copies bytes)\n")
    (work / "k3s-airgap-images-stand-in.tar").write_bytes(b"\0" * 1024)
    hosts = {
        f"{PREFIX}-amd64": {"mots_client_type": "type-1"},
        f"{PREFIX}-arm64": {"mots_client_type": "type-2"},
    }
    inv = {"all": {"children": {"mots_edge": {"hosts": hosts, "vars": {
        "ansible_connection": "containers.podman.podman",
        "ansible_podman_executable": str(exe),
        "ansible_python_interpreter": "/usr/bin/python3",
        "k3s_url": "https://k3s-server.test:6443",
        "k3s_token": "K10stand-in::server:token",
        "k3s_binary_src": str(work / "k3s"),
        "k3s_airgap_images": [str(work / "k3s-airgap-images-stand-in.tar")],
        "mots_registry_host": "registry.mots.test:5000",
        "mots_registry_ca_src": str(work / "registry-ca.crt"),
        "mots_registry_username": "mots-pull",
        "mots_registry_password": "stand-in-password",
        "mots_ntp_servers": ["ntp.mots.test"],
        "mots_tasks": TASKS,
        "mots_reboot": False,
        "mots_start_services": False,
    }}}}}  # fmt: skip
    path = work / "inventory.yml"
    path.write_text(yaml.safe_dump(inv, sort_keys=False))
    return path


def play(inv: Path, env: dict[str, str], log: Path) -> dict[str, dict[str, int]]:
    """One ansible-playbook run over the stand-ins; its recap (the output kept in `log`)."""
    ansible = Path(sys.executable).with_name("ansible-playbook")
    proc = subprocess.run(
        [str(ansible), "-i", str(inv), str(PLAYBOOK)],
        env=env, capture_output=True, text=True, timeout=3600, cwd=PLAYBOOK.parent,
    )  # fmt: skip
    log.write_text(proc.stdout + proc.stderr)
    got = recap(proc.stdout)
    if proc.returncode != 0 or not got:
        raise RuntimeError(f"ansible-playbook exited {proc.returncode}: {proc.stdout[-3000:]}")
    return got


def checks(name: str, client_type: str) -> dict[str, bool]:
    """testinfra on one provisioned stand-in: each fact the overlay and k3s rely on."""
    import testinfra

    host = testinfra.get_host(f"podman://{name}")
    f = host.file
    cmdline = f("/boot/firmware/cmdline.txt").content_string.split()
    labels = yaml.safe_load(f("/etc/rancher/k3s/config.yaml").content_string)
    regs = yaml.safe_load(f("/etc/rancher/k3s/registries.yaml").content_string)
    spec = yaml.safe_load(DAEMONSET.read_text())["spec"]["template"]["spec"]
    want_labels = {f"{k}={v}" for k, v in spec["nodeSelector"].items() if k.startswith("mots.io/")}
    taint_keys = {t["key"] for t in spec["tolerations"]}
    enabled = "/etc/systemd/system/{}.wants/{}"
    device = (ROOT / "k8s" / "overlays" / "k3s-pi" / "devices" / f"{client_type}.env").read_text()

    def owned(path: str) -> bool:
        """A directory of the images' user (uid 10001)."""
        return bool(f(path).is_directory) and f(path).uid == 10001 and f(path).gid == 10001

    return {
        "cgroup_flags_once": all(cmdline.count(x) == 1 for x in ("cgroup_memory=1", "cgroup_enable=memory"))
        and cmdline[0] == "console=serial0,115200",
        "timesyncd_ntp": "NTP=ntp.mots.test" in f("/etc/systemd/timesyncd.conf.d/mots.conf").content_string,
        "timesyncd_enabled": f(enabled.format("sysinit.target", "systemd-timesyncd.service")).is_symlink,
        "time_wait_sync_enabled": f(enabled.format("sysinit.target", "systemd-time-wait-sync.service")).is_symlink,
        "k3s_agent_enabled": f(enabled.format("multi-user.target", "k3s-agent.service")).is_symlink,
        "k3s_waits_for_time": "After=network-online.target time-sync.target" in f("/etc/systemd/system/k3s-agent.service").content_string,
        "k3s_join_root_only": f("/etc/systemd/system/k3s-agent.service.env").mode == 0o600
        and "K3S_URL=https://k3s-server.test:6443" in f("/etc/systemd/system/k3s-agent.service.env").content_string,
        "k3s_binary": f("/usr/local/bin/k3s").mode == 0o755,
        "airgap_tarball": f("/var/lib/rancher/k3s/agent/images/k3s-airgap-images-stand-in.tar").size == 1024,
        "labels_recorded": want_labels | {f"mots.io/client-type={client_type}"} <= set(labels["node-label"]),
        "taint_tolerated": {t.split("=")[0].split(":")[0] for t in labels["node-taint"]} <= taint_keys
        and all(t.endswith(":NoSchedule") for t in labels["node-taint"]),
        "node_name": labels["node-name"] == name,
        "registry_config": f("/etc/rancher/k3s/registries.yaml").mode == 0o600
        and regs["configs"]["registry.mots.test:5000"]["auth"]["username"] == "mots-pull"
        and f(regs["configs"]["registry.mots.test:5000"]["tls"]["ca_file"]).exists,
        "state_dir": owned("/var/lib/mots/agent") and f("/var/lib/mots/agent").mode == 0o700,
        "task_dirs": all(owned(f"/srv/mots/{t}") for t in TASKS)
        and sorted(f("/srv/mots").listdir()) == sorted(TASKS),
        "device_file": f("/etc/mots/device/device.env").content_string == device,
        "no_client_index": not f(FORMER_INDEX).exists,
    }  # fmt: skip


def run() -> dict[str, Any]:
    """Build the stand-ins, provision them twice, check them; remove them whatever happens."""
    started = time.monotonic()
    out = ROOT / "out" / "deploy" / "provision"
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="mots-pv-") as tmp:
        work = Path(tmp)
        exe = wrapper(work)
        env = podman.env({
            "PATH": f"{work}:{os.environ['PATH']}", "ANSIBLE_NOCOLOR": "1",
            "ANSIBLE_LOCAL_TEMP": str(work / "ansible-local"), "ANSIBLE_RETRY_FILES_ENABLED": "0",
        })  # fmt: skip
        try:
            for arch in ARCHES:
                tag = f"localhost/mots-stand-in/raspberry-pi-os:test-{arch}"
                base = ensure_base(arch)
                run_wrapped(exe, env, "build", "--format", "docker", "--layers", "--platform",
                            f"linux/{arch}", "--build-arg", f"BASE={base}", "-t", tag, str(STANDIN))  # fmt: skip
                run_wrapped(exe, env, "run", *podman.ULIMITS, "-d", "--name", f"{PREFIX}-{arch}", "--network", "none",
                            "--platform", f"linux/{arch}", tag)  # fmt: skip
            # the amd64 "Pi" was provisioned by the former playbook: its client-index must go
            run_wrapped(exe, env, "exec", f"{PREFIX}-amd64", "sh", "-c",
                        f"mkdir -p {Path(FORMER_INDEX).parent} && echo 0 > {FORMER_INDEX}")  # fmt: skip
            inv = inventory(work, exe)
            first = play(inv, env, out / "first.log")
            second = play(inv, env, out / "second.log")
            old_path = os.environ["PATH"]
            os.environ["PATH"] = env["PATH"]  # testinfra's podman backend: the locked wrapper
            try:
                got = {
                    f"{PREFIX}-amd64": checks(f"{PREFIX}-amd64", "type-1"),
                    f"{PREFIX}-arm64": checks(f"{PREFIX}-arm64", "type-2"),
                }
            finally:
                os.environ["PATH"] = old_path
        finally:
            for arch in ARCHES:
                run_wrapped(
                    exe, env, "rm", "--force", "--time", "2", f"{PREFIX}-{arch}", check=False
                )
    failed = sorted(f"{h}:{k}" for h, c in got.items() for k, ok in c.items() if not ok)
    result: dict[str, Any] = {
        "first_changed": sum(r["changed"] for r in first.values()),
        "second_changed": sum(r["changed"] for r in second.values()),
        "hosts": {h: {"first": first[h], "second": second[h]} for h in first},
        "checks": {h: sum(c.values()) for h, c in got.items()},
        "checks_total": sum(len(c) for c in got.values()),
        "seconds": round(time.monotonic() - started, 1),
    }
    if failed or result["second_changed"] != 0 or result["first_changed"] == 0:
        result["failed"] = failed or ["second run changed something" if result["second_changed"]
                                      else "first run changed nothing"]  # fmt: skip
    return result


def run_wrapped(exe: Path, env: dict[str, str], *args: str, check: bool = True) -> None:
    """One podman command through the locked wrapper."""
    proc = subprocess.run([str(exe), *args], env=env, capture_output=True, text=True, timeout=3600)
    if check and proc.returncode != 0:
        raise podman.PodmanError(
            f"podman {' '.join(args)}: {proc.stdout[-1500:]}{proc.stderr[-2000:]}"
        )
