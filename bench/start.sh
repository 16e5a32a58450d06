#!/usr/bin/env bash
# Measures create→ready of engineer and agent sandboxes against a bare
# `podman run` of the same image (bench/start/main.go says what is timed).
# It runs a scratch gateway on the podman driver over the images `make
# images` built, and prints medians and ratios.
#
#   bench/start.sh [-n RUNS]
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"
root=${BERTH_SANDBOX_PODMAN_ROOT:-$PWD/.berth/data/podman}
[ -f "$root/storage.conf" ] || { echo "no podman root at $root: run make images first" >&2; exit 1; }

work=$(mktemp -d)
trap 'kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; rm -rf "$work"' EXIT
go build -o "$work/berth" ./cmd/berth
go build -o "$work/bench" ./bench/start
ssh-keygen -q -t ed25519 -N '' -f "$work/key"

export BERTH_DATA_DIR=$work/data BERTH_SANDBOX_DRIVER=podman BERTH_SANDBOX_PODMAN_ROOT=$root \
  BERTH_SANDBOXES_FILE=$PWD/examples/sandboxes.yaml BERTH_SANDBOX_GIT_FORGE=local \
  BERTH_ADDR=127.0.0.1:18181 BERTH_URL=http://127.0.0.1:18181 BERTH_LOG_LEVEL=warn
"$work/berth" serve 2>"$work/serve.log" &
pid=$!
for _ in $(seq 1 100); do curl -fsS "$BERTH_URL/healthz" >/dev/null 2>&1 && break; sleep 0.1; done
BERTH_API_KEY=$("$work/berth" admin bootstrap -o json | sed -n 's/.*"secret": "\(.*\)".*/\1/p')
export BERTH_API_KEY
"$work/bench" -podman-root "$root" -ssh-key "$work/key.pub" "$@"
