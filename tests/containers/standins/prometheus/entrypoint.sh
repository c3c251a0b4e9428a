#!/bin/sh
# The official image stores in /prometheus (its working directory); Debian's build defaults to
# /var/lib/prometheus/metrics2. Keep the official path unless the arguments give one.
case " $* " in
  *" --storage.tsdb.path"*) exec /usr/bin/prometheus "$@" ;;
  *) exec /usr/bin/prometheus --storage.tsdb.path=/prometheus "$@" ;;
esac
