#!/usr/bin/env bash
# Measures GET /sandbox/v1/sandboxes on 1,000 sandboxes with 8 clients at
# once (bench/lists/main.go says what is timed): this tree's gateway
# against one built from REF (default main), both on SQLite and the fake
# driver, rounds alternating between them. Prints medians and ratios.
#
#   bench/lists.sh [REF] [-- flags of bench/lists]
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"
ref=${1:-main}
shift || true
[ "${1:-}" = "--" ] && shift
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$work/src-before"
git archive "$ref" | tar -x -C "$work/src-before"
(cd "$work/src-before" && go build -o "$work/berth-before" ./cmd/berth)
go build -o "$work/berth-after" ./cmd/berth
go build -o "$work/bench" ./bench/lists
ssh-keygen -q -t ed25519 -N '' -f "$work/key"

# start NAME PORT: a gateway of binary berth-NAME, its operator's key in
# $work/NAME/key.
start() {
  local name=$1 port=$2
  mkdir -p "$work/$name"
  env BERTH_DATA_DIR="$work/$name/data" BERTH_SANDBOX_DRIVER=fake \
    BERTH_SANDBOXES_FILE="$PWD/examples/sandboxes.yaml" \
    BERTH_ADDR=127.0.0.1:$port BERTH_URL=http://127.0.0.1:$port BERTH_LOG_LEVEL=warn HOME="$work/$name" \
    "$work/berth-$name" serve >"$work/$name/serve.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 1 100); do curl -fsS "http://127.0.0.1:$port/healthz" >/dev/null 2>&1 && break; sleep 0.1; done
  env BERTH_DATA_DIR="$work/$name/data" BERTH_SANDBOXES_FILE="$PWD/examples/sandboxes.yaml" HOME="$work/$name" \
    "$work/berth-$name" admin bootstrap -o json |
    sed -n 's/.*"secret": "\(.*\)".*/\1/p' >"$work/$name/key"
}
port=${BERTH_BENCH_PORT:-18191}
start before "$port"
start after $((port + 1))
BERTH_BEFORE_KEY=$(cat "$work/before/key") BERTH_AFTER_KEY=$(cat "$work/after/key") \
  "$work/bench" -before "http://127.0.0.1:$port" -after "http://127.0.0.1:$((port + 1))" -before-name "$ref" -ssh-key "$work/key.pub" "$@"
