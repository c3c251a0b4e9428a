#!/bin/bash
# The official postgres image's first-start contract, in short: initdb into PGDATA with
# POSTGRES_USER and POSTGRES_PASSWORD, create POSTGRES_DB, run /docker-entrypoint-initdb.d/*.sql
# and *.sh once, then serve on every interface with scram password auth for remote clients.
set -euo pipefail
user=${POSTGRES_USER:-postgres}
db=${POSTGRES_DB:-$user}
if [ "${1:-postgres}" = postgres ] && [ ! -s "$PGDATA/PG_VERSION" ]; then
  : "${POSTGRES_PASSWORD:?POSTGRES_PASSWORD must be set}"
  mkdir -p "$PGDATA" && chmod 700 "$PGDATA"
  initdb --username="$user" --pwfile=<(printf '%s\n' "$POSTGRES_PASSWORD") \
    --auth-local=trust --auth-host=scram-sha-256 -D "$PGDATA" >/dev/null
  printf 'host all all all scram-sha-256\n' >> "$PGDATA/pg_hba.conf"
  pg_ctl -D "$PGDATA" -o "-c listen_addresses=''" -w start >/dev/null
  if [ "$db" != postgres ]; then
    psql -v ON_ERROR_STOP=1 --username "$user" --dbname postgres -c "CREATE DATABASE \"$db\"" >/dev/null
  fi
  for f in /docker-entrypoint-initdb.d/*; do
    case "$f" in
      *.sql) psql -v ON_ERROR_STOP=1 --username "$user" --dbname "$db" -f "$f" >/dev/null ;;
      *.sh) . "$f" ;;
    esac
  done
  pg_ctl -D "$PGDATA" -m fast -w stop >/dev/null
fi
if [ "${1:-postgres}" = postgres ]; then
  shift || true
  exec postgres -c listen_addresses='*' "$@"
fi
exec "$@"
