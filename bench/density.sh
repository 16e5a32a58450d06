#!/usr/bin/env bash
# Density (issue 21): 100 idle engineer sandboxes (class standard) on the
# podman driver on this host, and list/show latency with 10,000 sandbox
# rows (bench/density/main.go says what is measured and counted). It runs a
# scratch gateway on the podman driver over the images `make images`
# built, and two on the fake driver for the rows; it terminates every
# sandbox it made and, whatever happened, removes their containers and
# volumes.
#
#   bench/density.sh [-n ROUNDS] [-sandboxes N] [-rows N] [-parts podman,lists]
source "$(dirname "$0")/lib.sh" density
ids=$work/ids
podman_() { CONTAINERS_CONF=$root/containers.conf CONTAINERS_STORAGE_CONF=$root/storage.conf podman "$@"; }
bench_cleanup() {
  [ -s "$ids" ] || return 0
  local left=()
  while read -r id; do
    if podman_ container exists "berth-$id" || podman_ volume exists "berth-$id"; then left+=("berth-$id"); fi
  done <"$ids"
  [ ${#left[@]} -eq 0 ] && return 0
  echo "bench: removing ${#left[@]} sandboxes' containers and volumes left behind" >&2
  podman_ rm -f -t 0 "${left[@]}" >/dev/null 2>&1 || true
  podman_ volume rm -f "${left[@]}" >/dev/null 2>&1 || true
}
rc=0
"$work/bench" -gateway-pid "$pid" -podman-root "$root" -ids "$ids" -ssh-key "$work/key.pub" \
  -berth "$work/berth" -classes examples/sandboxes.yaml "$@" || rc=$?
if [ $rc -ne 0 ]; then
  echo "bench: the podman gateway's log ends:" >&2
  tail -n 30 "$work/serve.log" >&2
fi
exit $rc
