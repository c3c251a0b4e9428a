#!/usr/bin/env bash
# Install what the container checks need (Debian packages: podman, runc, debootstrap,
# qemu-user-static, uidmap, slirp4netns) and build the local base images
# (docker/base/build-base.sh). Idempotent: what is installed or built already is left alone.
#   scripts/ensure_containers.sh            # amd64 base
#   scripts/ensure_containers.sh arm64      # and the arm64 one (registers QEMU's binfmt handler)
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
# catatonit: the pause image of pods (kube play); dnsname + dnsmasq-base: container names resolve
# on podman networks (CNI); iproute2 + iptables: the edge links shaped (tests/containers/network.py);
# docker-registry (the CNCF distribution registry), apache2-utils (htpasswd) and skopeo: the
# registry the images are pushed to and pulled from (tests/containers/registry.py)
for pkg in podman runc debootstrap qemu-user-static uidmap slirp4netns catatonit \
  golang-github-containernetworking-plugin-dnsname dnsmasq-base iproute2 iptables \
  docker-registry apache2-utils skopeo; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || need_apt+=("$pkg")
done
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "ensure_containers: installing ${need_apt[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
fi

arches=(--arch amd64)
for a in "$@"; do arches+=(--arch "$a"); done
CONTAINERS_CONF="$PWD/tests/containers/containers.conf" bash docker/base/build-base.sh "${arches[@]}"
