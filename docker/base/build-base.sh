#!/usr/bin/env bash
# Builds the local stand-in for the images' base, python:3.11.14-slim-bookworm, where no registry
# can be pulled: a Debian bookworm root made with debootstrap (minbase, Debian's mirror as apt has
# it configured) plus Debian's Python 3.11 (python3, python3-venv, python-is-python3: `python` on
# PATH as in the official image), imported with `podman import` as
#   localhost/mots/python:3.11-bookworm-<arch>
# Pass it to the Dockerfiles as PYTHON_IMAGE (make images does). Idempotent: an image that exists
# is kept (--force rebuilds); for a foreign --arch it first registers QEMU's binfmt handler.
#
#   docker/base/build-base.sh --arch amd64 --arch arm64 [--force]
#
# Differences from the official image, none of which the Dockerfiles rely on: Python 3.11.2 from
# Debian (/usr/bin/python) instead of 3.11.14 built from source (/usr/local/bin/python).
set -euo pipefail

REPO=localhost/mots/python
TAG_PREFIX=3.11-bookworm
SUITE=bookworm
PACKAGES=python3,python3-venv,python-is-python3,ca-certificates
ARCHES=()
FORCE=0

while [ $# -gt 0 ]; do
  case "$1" in
    --arch) ARCHES+=("$2"); shift 2 ;;
    --force) FORCE=1; shift ;;
    --print-image) echo "${REPO}:${TAG_PREFIX}-$2"; exit 0 ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
[ ${#ARCHES[@]} -gt 0 ] || ARCHES=(amd64)

podman_() { podman --runtime runc --cgroup-manager cgroupfs "$@"; }

# The Debian packages this needs, installed once (a clean machine gets them here).
ensure_tools() {
  local missing=()
  command -v debootstrap >/dev/null || missing+=(debootstrap)
  command -v podman >/dev/null || missing+=(podman)
  command -v runc >/dev/null || missing+=(runc)
  if [ ${#missing[@]} -gt 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
      --no-install-recommends "${missing[@]}"
  fi
}

# QEMU user emulation for arm64: qemu-user-static, binfmt_misc mounted, the aarch64 handler
# registered from Debian's binfmt.d file (its F flag opens the interpreter now, so containers
# without QEMU inside run it). Does nothing when all three are in place.
ensure_binfmt_arm64() {
  if ! [ -f /usr/lib/binfmt.d/qemu-aarch64.conf ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
      --no-install-recommends qemu-user-static
  fi
  if ! [ -e /proc/sys/fs/binfmt_misc/register ]; then
    mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc
  fi
  if ! [ -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ]; then
    grep -v '^#' /usr/lib/binfmt.d/qemu-aarch64.conf > /proc/sys/fs/binfmt_misc/register
  fi
}

# apt's configured Debian mirror (deb822 sources first, then sources.list).
debian_mirror() {
  local uri=""
  if compgen -G "/etc/apt/sources.list.d/*.sources" >/dev/null; then
    uri=$(awk '/^URIs:/ && $2 ~ /debian\/?$/ {print $2; exit}' /etc/apt/sources.list.d/*.sources)
  fi
  if [ -z "$uri" ] && [ -f /etc/apt/sources.list ]; then
    uri=$(awk '$1 == "deb" && $3 == "'"$SUITE"'" {print $2; exit}' /etc/apt/sources.list)
  fi
  echo "${uri:-http://deb.debian.org/debian}"
}

build_one() {
  local arch=$1 image="${REPO}:${TAG_PREFIX}-$1" mirror root started
  if [ "$FORCE" = 0 ] && podman_ image exists "$image"; then
    echo "base $image: present"
    return 0
  fi
  [ "$arch" = amd64 ] || ensure_binfmt_arm64
  mirror=$(debian_mirror)
  root=$(mktemp -d /var/tmp/mots-base-XXXXXX)
  # shellcheck disable=SC2064
  trap "rm -rf '$root'" RETURN
  started=$(date +%s)
  debootstrap --variant=minbase --arch="$arch" --include="$PACKAGES" "$SUITE" "$root" "$mirror" \
    > "$root.log" 2>&1 || { tail -n 30 "$root.log" >&2; rm -f "$root.log"; return 1; }
  rm -f "$root.log"
  # apt inside derived images (the stand-ins of tests/containers) uses the same mirror; security
  # updates as the official image gets them.
  cat > "$root/etc/apt/sources.list" <<SOURCES
deb $mirror $SUITE main
deb $mirror $SUITE-updates main
deb ${mirror%/debian}/debian-security $SUITE-security main
SOURCES
  # Slim like python:*-slim: no apt lists, docs, man pages or locales beyond C.
  rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/var/cache/apt/archives/*.deb \
    "$root"/usr/share/doc/* "$root"/usr/share/man/* "$root"/usr/share/info/* \
    "$root"/usr/share/locale/* "$root"/var/log/*.log
  tar -C "$root" --numeric-owner -c . | podman_ import --arch "$arch" \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV LANG=C.UTF-8' --change 'CMD ["python3"]' \
    --message "debootstrap $SUITE minbase + $PACKAGES from $mirror" - "$image" >/dev/null
  podman_ run --rm --arch "$arch" --ulimit nofile=1024:1024 --ulimit nproc=1024:1024 "$image" \
    python -c "import platform, ssl, venv; print('base', platform.machine(), platform.python_version())"
  echo "base $image: built in $(( $(date +%s) - started )) s"
}

ensure_tools
for a in "${ARCHES[@]}"; do build_one "$a"; done
