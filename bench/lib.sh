# Sourced by the benchmarks: builds berth and the benchmark program $1
# (a directory under bench/) into a scratch directory, and starts a
# gateway on the podman driver over the images `make images` built, with
# the operator's key in BERTH_API_KEY. It sets work (the scratch
# directory), root (the podman root), BERTH_URL and BERTH_API_KEY. The
# gateway listens on loopback, unless the script set bench_reach=1 (its
# sandboxes call the gateway: a warm pool's members trade their token
# there): then on every address, and sandboxes find it at the host's
# address on podman's bridge. Just before the gateway starts it runs
# bench_before_serve when the script defines one (to write the files in
# work that the gateway's settings name). On exit it runs bench_cleanup
# when the script defines one, stops the gateway, prints the end of its
# log when the benchmark failed (BERTH_BENCH_LOG names a file to keep it
# whole in, at BERTH_BENCH_LOG_LEVEL, default warn), and removes the
# scratch directory.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"
root=${BERTH_SANDBOX_PODMAN_ROOT:-$PWD/.berth/data/podman}
[ -f "$root/storage.conf" ] || { echo "no podman root at $root: run make images first" >&2; exit 1; }

work=$(mktemp -d)
pid=
bench_exit() {
  local status=$?
  if declare -F bench_cleanup >/dev/null; then bench_cleanup || true; fi
  # The gateway may have died already (it refused its settings): kill fails
  # then, and under set -e that would end the clean-up here.
  if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  if [ -n "${BERTH_BENCH_LOG:-}" ]; then cp "$work/serve.log" "$BERTH_BENCH_LOG" || true; fi
  if [ "$status" -ne 0 ] && [ -s "$work/serve.log" ]; then
    echo "bench: the gateway's log ends:" >&2
    tail -n 30 "$work/serve.log" >&2
  fi
  rm -rf "$work"
}
trap bench_exit EXIT
go build -o "$work/berth" ./cmd/berth
go build -o "$work/bench" "./bench/$1"
ssh-keygen -q -t ed25519 -N '' -f "$work/key"

# The first port from 18181 nobody listens on: other benchmarks may run
# on this machine at the same time.
free_port() {
  local p
  for p in $(seq 18181 18280); do
    (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { echo "$p"; return; }
  done
  echo 18181
}
port=${BERTH_BENCH_PORT:-$(free_port)}
export BERTH_DATA_DIR=$work/data BERTH_SANDBOX_DRIVER=podman BERTH_SANDBOX_PODMAN_ROOT=$root \
  BERTH_SANDBOXES_FILE=$PWD/examples/sandboxes.yaml BERTH_SANDBOX_GIT_FORGE=local \
  BERTH_ADDR=127.0.0.1:$port BERTH_URL=http://127.0.0.1:$port BERTH_LOG_LEVEL=${BERTH_BENCH_LOG_LEVEL:-warn}
if [ "${bench_reach:-}" = 1 ]; then
  export BERTH_ADDR=:$port BERTH_SANDBOX_PUBLIC_URL=http://host.containers.internal:$port
fi
if declare -F bench_before_serve >/dev/null; then bench_before_serve; fi
"$work/berth" serve 2>"$work/serve.log" &
pid=$!
for _ in $(seq 1 100); do curl -fsS "$BERTH_URL/healthz" >/dev/null 2>&1 && break; sleep 0.1; done
BERTH_API_KEY=$("$work/berth" admin bootstrap -o json | sed -n 's/.*"secret": "\(.*\)".*/\1/p')
export BERTH_API_KEY
