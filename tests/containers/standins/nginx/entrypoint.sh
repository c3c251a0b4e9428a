#!/bin/sh
# The official nginx image's entrypoint, the parts docker/compose.yaml's front uses
# (docker-entrypoint.d/15-local-resolvers.envsh and 20-envsubst-on-templates.sh): the local
# resolvers, then every /etc/nginx/templates/*.template rendered into /etc/nginx/conf.d with only
# the variables the environment sets (nginx's own $host, $remote_addr, ... are left alone).
set -eu
if [ -n "${NGINX_ENTRYPOINT_LOCAL_RESOLVERS:-}" ]; then
  NGINX_LOCAL_RESOLVERS=$(awk 'BEGIN{ORS=" "} $1=="nameserver" {
    if ($2 ~ ":") print "[" $2 "]"; else print $2 }' /etc/resolv.conf)
  export NGINX_LOCAL_RESOLVERS="${NGINX_LOCAL_RESOLVERS% }"
fi
defined=$(printf '${%s} ' $(env | cut -d= -f1))
for template in /etc/nginx/templates/*.template; do
  [ -f "$template" ] || continue
  out="/etc/nginx/conf.d/$(basename "$template" .template)"
  envsubst "$defined" < "$template" > "$out"
done
exec "$@"
