#!/bin/sh
# The container's entry point: `shoal server` on the container's own address.
#   SHOAL_CONFIG          the YAML (default /etc/shoal/shoal.yaml)
#   SHOAL_LISTEN_ADDRESS  listen (and rpc) address; default: the container's
#                         first address (`hostname -i`). Kubernetes sets it
#                         to the pod IP (deploy/k8s/statefulset.yaml).
#   SHOAL_BIN             the binary (default /usr/local/bin/shoal)
# Further arguments are passed to `shoal server` (flags override the YAML).
set -eu
config="${SHOAL_CONFIG:-/etc/shoal/shoal.yaml}"
address="${SHOAL_LISTEN_ADDRESS:-}"
if [ -z "$address" ]; then
  address="$(hostname -i | awk '{print $1}')"
fi
exec "${SHOAL_BIN:-/usr/local/bin/shoal}" server --config "$config" --listen-address "$address" "$@"
