#!/bin/sh
# Restore the MoTS databases from a backup set of backup.sh (docs/deploy.md, "Backups").
#
#   restore.sh          the newest complete set in BACKUP_DIR
#   restore.sh STAMP    the set BACKUP_DIR/STAMP (e.g. 20261129T130000Z)
#
# Checks the set's SHA256SUMS first and restores nothing if a dump is damaged. Then, for each
# DB.dump, drops database DB (its connections closed: stop the services first, or they write into
# the half-restored database), creates it again owned by the connecting role and restores the dump
# into it in one transaction, stopping at the first error. The connection is libpq's environment
# (PGHOST, PGPORT, PGUSER, PGPASSWORD); the role must be allowed to create databases.
set -eu
dir=${BACKUP_DIR:-/backups}
name=${1:-$(ls -1 "$dir" | grep -E '^[0-9]{8}T[0-9]{6}Z$' | sort | tail -n 1)}
[ -n "$name" ] || { echo "restore: no backup set in $dir" >&2; exit 2; }
src="$dir/$name"
[ -f "$src/SHA256SUMS" ] || { echo "restore: $src is not a backup set (no SHA256SUMS)" >&2; exit 2; }
(cd "$src" && sha256sum -c SHA256SUMS) >&2 || { echo "restore: $src is damaged" >&2; exit 3; }
for dump in "$src"/*.dump; do
  db=$(basename "$dump" .dump)
  psql -v ON_ERROR_STOP=1 --quiet --dbname=postgres \
    -c "DROP DATABASE IF EXISTS \"$db\" WITH (FORCE)" -c "CREATE DATABASE \"$db\""
  pg_restore --exit-on-error --single-transaction --no-owner --no-privileges \
    --dbname="$db" "$dump"
  echo "restored $db from $name"
done
