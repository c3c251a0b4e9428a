#!/bin/bash
# The official postgres entrypoint's first-start work, for the env the manifests set.
set -euo pipefail
: "${POSTGRES_USER:=postgres}" "${POSTGRES_DB:=$POSTGRES_USER}"
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  mkdir -p "$PGDATA" && chmod 700 "$PGDATA"
  pw=$(mktemp) && printf '%s' "$POSTGRES_PASSWORD" > "$pw"
  initdb --username="$POSTGRES_USER" --pwfile="$pw" --auth-host=scram-sha-256 --auth-local=trust >/dev/null
  rm -f "$pw"
  echo "host all all all scram-sha-256" >> "$PGDATA/pg_hba.conf"
  pg_ctl -o "-c listen_addresses=''" -w start
  if [ "$POSTGRES_DB" != postgres ]; then
    psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname postgres -c "CREATE DATABASE \"$POSTGRES_DB\"" >/dev/null
  fi
  for f in /docker-entrypoint-initdb.d/*.sql; do
    [ -e "$f" ] && psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" -f "$f" >/dev/null
  done
  pg_ctl -m fast -w stop >/dev/null
fi
if [ "${1:-postgres}" = postgres ]; then shift || true; exec postgres -c listen_addresses='*' "$@"; fi
exec "$@"
