#!/bin/sh
# Scheduled PostgreSQL backups of the MoTS databases (issue 39, deliverable 6; docs/deploy.md,
# "Backups"). POSIX sh: it runs in the postgres image itself (pg_dump of the server's version).
#
#   backup.sh once    one backup set now, then prune (the k8s CronJob's command)
#   backup.sh loop    one now, then one every BACKUP_INTERVAL_S (compose's postgres-backup service)
#   backup.sh fresh   exit 0 if the newest set is younger than 2 x BACKUP_INTERVAL_S (health check)
#
# A set is a folder BACKUP_DIR/YYYYMMDDTHHMMSSZ/ with one pg_dump custom-format file per database
# (DB.dump) and SHA256SUMS. It is written under .partial-STAMP and renamed when complete, so a set
# that exists is whole: restore.sh never picks a half-written one. After each set, all but the
# newest BACKUP_KEEP sets are deleted. The connection is libpq's environment (PGHOST, PGPORT,
# PGUSER, PGPASSWORD).
set -eu
dir=${BACKUP_DIR:-/backups}
dbs=${BACKUP_DATABASES:-market orchestration evaluation}
keep=${BACKUP_KEEP:-28}
interval=${BACKUP_INTERVAL_S:-21600}
pattern='^[0-9]{8}T[0-9]{6}Z$'

sets() {  # the complete sets, oldest first
  ls -1 "$dir" | grep -E "$pattern" | sort
}

backup_once() {
  stamp=$(date -u +%Y%m%dT%H%M%SZ)
  while [ -e "$dir/$stamp" ]; do  # two sets in one second: the next second's name
    sleep 1
    stamp=$(date -u +%Y%m%dT%H%M%SZ)
  done
  tmp="$dir/.partial-$stamp"
  rm -rf "$tmp"
  mkdir -p "$tmp"
  for db in $dbs; do
    pg_dump --format=custom --file="$tmp/$db.dump" --dbname="$db"
  done
  (cd "$tmp" && sha256sum -- *.dump > SHA256SUMS)
  mv "$tmp" "$dir/$stamp"
  excess=$(( $(sets | wc -l) - keep ))
  if [ "$excess" -gt 0 ]; then
    sets | head -n "$excess" | while read -r old; do rm -rf "${dir:?}/$old"; done
  fi
  echo "backup $stamp: $dbs ($(sets | wc -l) sets kept in $dir)"
}

case "${1:-}" in
  once)
    mkdir -p "$dir"
    rm -rf "$dir"/.partial-*  # left by a run that was killed
    backup_once
    ;;
  loop)
    mkdir -p "$dir"
    rm -rf "$dir"/.partial-*
    until pg_isready --quiet --dbname=postgres; do sleep 2; done  # started beside the server
    while :; do
      backup_once || echo "backup failed; next try in ${interval}s" >&2
      sleep "$interval"
    done
    ;;
  fresh)
    newest=$(sets | tail -n 1)
    [ -n "$newest" ] || { echo "no backup in $dir" >&2; exit 1; }
    age=$(( $(date -u +%s) - $(stat -c %Y "$dir/$newest") ))
    [ "$age" -lt $(( 2 * interval )) ] || { echo "newest backup $newest is ${age}s old" >&2; exit 1; }
    echo "newest backup $newest (${age}s old)"
    ;;
  *)
    echo "usage: backup.sh once|loop|fresh" >&2
    exit 2
    ;;
esac
