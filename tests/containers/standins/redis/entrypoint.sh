#!/bin/sh
# As the official image's entrypoint: arguments that start with `-` are redis-server's (k8s passes
# only args), and redis-server listens on every interface with protected mode off (the network,
# not a password, keeps it private).
set -e
case "${1:-}" in
  -*|*.conf) set -- redis-server "$@" ;;
esac
if [ "${1:-}" = "redis-server" ]; then
  shift
  set -- redis-server --protected-mode no --bind "* -::*" "$@"
fi
exec "$@"
