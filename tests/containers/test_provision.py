"""deploy/ansible/pi.yml (issue 39, deliverable 2): the fast checks (syntax, the 20-Pi inventory,
labels and taint against the overlay, the boot-flag edit's idempotence) and the long container
check (marked deploy: two runs on amd64 and arm64 stand-ins, testinfra on the result)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.containers import provision

ANSIBLE = Path(sys.executable).with_name("ansible-playbook")
HERE = provision.PLAYBOOK.parent
EXAMPLE = HERE / "inventory.example.yml"


ROLE = HERE / "roles" / "mots_edge"


def _role(part: str) -> Any:
    """One YAML file of the playbook's role (defaults, tasks, handlers)."""
    return yaml.safe_load((ROLE / part / "main.yml").read_text())


def _syntax(playbook: Path) -> subprocess.CompletedProcess[str]:
    """ansible-playbook --syntax-check on `playbook` with the example inventory."""
    if not ANSIBLE.exists():
        pytest.skip("ansible is not installed (make install: the provision extra)")
    return subprocess.run(
        [str(ANSIBLE), "--syntax-check", "-i", str(EXAMPLE), str(playbook)],
        capture_output=True, text=True, timeout=120, cwd=HERE,
    )  # fmt: skip


def test_playbook_syntax(tmp_path: Path) -> None:
    """The playbook parses; a broken copy of it does not (the check can fail)."""
    assert _syntax(provision.PLAYBOOK).returncode == 0
    shutil.copytree(HERE / "roles", tmp_path / "roles")
    tasks = tmp_path / "roles" / "mots_edge" / "tasks" / "main.yml"
    tasks.write_text(tasks.read_text().replace("  block:", "  block: [", 1))
    broken = tmp_path / "pi.yml"
    broken.write_text(provision.PLAYBOOK.read_text())
    assert _syntax(broken).returncode != 0


def test_example_inventory_is_the_testbed() -> None:
    """20 Pis in mots_edge: 10 type-1, 5 type-2, 5 type-3 (the paper's testbed, docs/deploy.md),
    the join, the registry and the tasks set for all, and no client-index (tasks replaced it)."""
    group = yaml.safe_load(EXAMPLE.read_text())["all"]["children"]["mots_edge"]
    hosts = group["hosts"]
    assert len(hosts) == 20
    assert Counter(h["mots_client_type"] for h in hosts.values()) == {
        "type-1": 10, "type-2": 5, "type-3": 5,
    }  # fmt: skip
    assert not [h for h in hosts.values() if "mots_client_index" in h]
    for key in ("k3s_url", "k3s_token", "k3s_binary_src", "mots_registry_host", "mots_tasks"):
        assert key in group["vars"], key
    assert "vault_" in group["vars"]["k3s_token"]  # the token is never in the inventory itself


def _overlay_tasks() -> list[str]:
    """The tasks whose /srv/mots/<task> the edge DaemonSet mounts (hostPath volumes)."""
    spec = yaml.safe_load(provision.DAEMONSET.read_text())["spec"]["template"]["spec"]
    paths = [v["hostPath"]["path"] for v in spec["volumes"] if "hostPath" in v]
    return sorted(p.removeprefix("/srv/mots/") for p in paths if p.startswith("/srv/mots/"))


def test_data_directories_are_the_overlays_tasks() -> None:
    """The playbook makes one /srv/mots/<task> per task of mots_tasks, by default (and in the
    example inventory) the tasks whose folders the edge DaemonSet mounts; it no longer makes
    /var/lib/mots/data nor writes a client-index, and removes one a former run left."""
    overlay = _overlay_tasks()
    assert overlay == sorted(provision.TASKS) == ["digits", "fashion-mnist"]
    assert sorted(_role("defaults")["mots_tasks"]) == overlay
    group = yaml.safe_load(EXAMPLE.read_text())["all"]["children"]["mots_edge"]
    assert sorted(group["vars"]["mots_tasks"]) == overlay
    tasks = [t for b in _role("tasks") for t in b.get("block", [])]
    per_task = next(t for t in tasks if t.get("loop") == "{{ mots_tasks }}")
    assert per_task["ansible.builtin.file"]["path"] == "/srv/mots/{{ item }}"
    assert per_task["ansible.builtin.file"]["state"] == "directory"
    made = [i["path"] for t in tasks if isinstance(t.get("loop"), list) for i in t["loop"]
            if isinstance(i, dict)]  # fmt: skip
    assert "/var/lib/mots/data" not in made and "/var/lib/mots/agent" in made
    index = [t for t in tasks if "client-index" in str(t.get("ansible.builtin.file", {}))]
    assert [t["ansible.builtin.file"]["state"] for t in index] == ["absent"]
    assert not [t for t in tasks if "client-index" in str(t.get("ansible.builtin.copy", {}))]


def test_labels_and_taint_are_what_the_overlay_selects() -> None:
    """The labels the playbook gives a Pi carry the edge DaemonSet's mots.io nodeSelector, and
    every taint it sets is one the DaemonSet tolerates (NoSchedule, key mots.io/edge)."""
    spec = yaml.safe_load(provision.DAEMONSET.read_text())["spec"]["template"]["spec"]
    play_vars = _role("defaults")
    labels = set(play_vars["mots_node_labels"])
    for key, value in spec["nodeSelector"].items():
        if key.startswith("mots.io/"):
            assert f"{key}={value}" in labels
    tolerated = {(t["key"], t["effect"]) for t in spec["tolerations"]}
    for taint in play_vars["mots_node_taints"]:
        key_value, effect = taint.rsplit(":", 1)
        assert (key_value.split("=")[0], effect) in tolerated, taint


def _cmdline_edit(line: str) -> str:
    """Apply the playbook's cmdline.txt edit (lineinfile, backrefs) for both flags, as Python's
    re does it inside Ansible's lineinfile."""
    task = next(t for b in _role("tasks") for t in b.get("block", []) if "lineinfile" in str(t))
    spec = task["ansible.builtin.lineinfile"]
    for flag in task["loop"]:
        regexp = spec["regexp"].replace("{{ item | regex_escape }}", re.escape(flag))
        match = re.search(regexp, line)
        if match:
            line = match.expand(spec["line"].replace("{{ item }}", flag))
    return line


def test_cmdline_flags_appended_once() -> None:
    """A fresh Pi's cmdline.txt gains both flags at the end; a second pass leaves it as it is, and
    a line that has one flag gains only the other."""
    fresh = "console=serial0,115200 console=tty1 root=PARTUUID=4e639091-02 rootwait"
    once = _cmdline_edit(fresh)
    assert once == fresh + " cgroup_memory=1 cgroup_enable=memory"
    assert _cmdline_edit(once) == once
    half = "root=/dev/mmcblk0p2 cgroup_enable=memory rootwait"
    assert _cmdline_edit(half) == half + " cgroup_memory=1"


def test_recap_is_read_per_host() -> None:
    """The changed counts come from ansible-playbook's PLAY RECAP, one row per host."""
    out = (
        "PLAY RECAP *********\n"
        "mots-pv-amd64              : ok=25   changed=19   unreachable=0    failed=0    skipped=3\n"
        "mots-pv-arm64              : ok=25   changed=0    unreachable=0    failed=0    skipped=3\n"
    )
    got = provision.recap(out)
    assert got["mots-pv-amd64"]["changed"] == 19 and got["mots-pv-arm64"]["changed"] == 0


@pytest.mark.deploy
def test_provision_twice_on_stand_ins(runtime: None) -> None:
    """The first run changes each stand-in Pi, the second changes nothing, testinfra's checks
    hold on both architectures."""
    got = provision.run()
    assert got["first_changed"] > 0 and got["second_changed"] == 0, got
    assert "failed" not in got, got
