#!/bin/sh
# As the official image's entrypoint: a bare `redis-server ...` listens on every interface with
# protected mode off (the network, not a password, keeps it private in compose).
set -e
if [ "$1" = "redis-server" ]; then
  shift
  set -- redis-server --protected-mode no --bind "* -::*" "$@"
fi
exec "$@"
