#!/bin/sh
# Upstream prometheus keeps its data in data/ of its working directory (/prometheus, the volume);
# Debian's build defaults to /var/lib/prometheus/metrics2. Keep upstream's unless a path is given.
case " $* " in
  *" --storage.tsdb.path"*) exec /usr/bin/prometheus "$@" ;;
  *) exec /usr/bin/prometheus --storage.tsdb.path=/prometheus "$@" ;;
esac
