#!/usr/bin/env bash
# Install (Debian packages) and start the local services that tests and the demo use.
# Idempotent: anything already installed or listening is left alone.
set -euo pipefail

need_apt=()
command -v redis-server >/dev/null 2>&1 || need_apt+=(redis-server)
command -v prometheus >/dev/null 2>&1 || [ -x /usr/bin/prometheus ] || need_apt+=(prometheus)
# amtool of tests/services/test_prometheus_rules.py (the Alertmanager routes checked)
command -v amtool >/dev/null 2>&1 || need_apt+=(prometheus-alertmanager)
[ -f /usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz ] || need_apt+=(dataset-fashion-mnist)
command -v pg_ctlcluster >/dev/null 2>&1 || need_apt+=(postgresql)
# the README's "Day two" lines read codes and URLs from --json with jq (tests/mots/cli/test_day_two.py)
command -v jq >/dev/null 2>&1 || need_apt+=(jq)
command -v curl >/dev/null 2>&1 || need_apt+=(curl)
# headless browser of tests/services/test_docs_browser.py (/docs and /redoc rendered offline)
command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "ensure_system: installing ${need_apt[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
  # Debian starts services on install where it can; we start what we need below.
fi

listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

if ! listening 6379; then
  echo "ensure_system: starting Redis on 127.0.0.1:6379"
  mkdir -p /var/lib/redis /var/log/redis
  redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" \
    --appendonly yes --appendfsync everysec \
    --dir /var/lib/redis --logfile /var/log/redis/ci.log
fi

if ! listening 5432; then
  echo "ensure_system: starting PostgreSQL on 127.0.0.1:5432"
  cluster=$(ls /etc/postgresql | head -n1)
  pg_ctlcluster --skip-systemctl-redirect "$cluster" main start || true
fi

for _ in $(seq 1 30); do
  listening 6379 && listening 5432 && break
  sleep 1
done
listening 6379 || { echo "ensure_system: Redis did not come up" >&2; exit 1; }
listening 5432 || { echo "ensure_system: PostgreSQL did not come up" >&2; exit 1; }
echo "ensure_system: Redis, PostgreSQL, Prometheus binary, Chromium and Fashion-MNIST are ready"
