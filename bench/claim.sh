#!/usr/bin/env bash
# Measures create→ssh-ready of an engineer sandbox claimed from a warm
# pool against a cold create of the same class, on the kubernetes driver
# with the real agent-sandbox controller (bench/claim/main.go says what is
# timed and what runs). kube-apiserver, etcd and the controller come from
# scripts/build-kube and scripts/build-controller (cached; a fresh machine
# builds them once), the pods run under podman over the images `make
# images` built.
#
#   bench/claim.sh [-n RUNS]
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"
root=${BERTH_SANDBOX_PODMAN_ROOT:-$PWD/.berth/data/podman}
[ -f "$root/storage.conf" ] || { echo "no podman root at $root: run make images first" >&2; exit 1; }
kube=${BERTH_TEST_KUBE:-$(scripts/build-kube)}
controller=${BERTH_TEST_CONTROLLER:-$(scripts/build-controller)}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go build -o "$work/berth" ./cmd/berth
go build -o "$work/bench" ./bench/claim
ssh-keygen -q -t ed25519 -N '' -f "$work/key"
"$work/bench" -berth "$work/berth" -kube "$kube" -controller "$controller" -podman-root "$root" -ssh-key "$work/key.pub" "$@"
