#!/usr/bin/env bash
# The load benchmark: sandbox creates through the API with 1, 8, 32 and 64
# concurrent clients, on SQLite and on PostgreSQL with one replica and with
# two, each point a scratch `berth serve` on the fake driver and a fresh
# database (bench/load/main.go says what is measured). It reports creates/s,
# p50 and p99 latency and the answers 500 (which must be 0), each against
# its baseline of the same run: N clients against 1 client, and, with
# -base, this tree against another revision. Medians of the runs, with the
# machine's load (/proc/loadavg) beside each. Then it runs bench/budget
# (see below) unless -no-budget.
#
#   bench/load.sh [-base REV] [-no-budget] [-runs N] [-creates N] [-clients 1,8,32,64]
#                 [-databases sqlite,postgres-1,postgres-2]
#
# -base REV builds berth at git revision REV too (main, say) and measures
# it in the same runs, alternating the two. PostgreSQL is BERTH_TEST_POSTGRES,
# or a throwaway server started durable (fsync and synchronous commit on,
# its defaults) on port BERTH_BENCH_PG_PORT (default 55434).
#
# Last, bench/budget (two replicas' budget overshoot and the latency a
# budget adds) runs on the same PostgreSQL and the berth binary built
# here (-berth), its output after this one's; bench/all runs it on its own
# and passes -no-budget.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"
base=
budget=yes
args=()
while [ $# -gt 0 ]; do
  case $1 in
  -base) base=${2:?-base needs a revision}; shift 2 ;;
  -no-budget) budget=; shift ;;
  *) args+=("$1"); shift ;;
  esac
done

work=$(mktemp -d)
source bench/postgres.sh
cleanup() {
  bench_postgres_stop
  rm -rf "$work"
}
trap cleanup EXIT
go build -o "$work/berth" ./cmd/berth
go build -o "$work/load" ./bench/load
load=(-berth "$work/berth")
if [ -n "$base" ]; then
  mkdir "$work/base"
  git archive "$base" | tar -x -C "$work/base"
  (cd "$work/base" && go build -o "$work/berth-base" ./cmd/berth)
  load+=(-base "$work/berth-base" -base-name "$base")
fi
bench_postgres
"$work/load" "${load[@]}" "${args[@]}"

if [ -n "$budget" ]; then
  echo
  go build -o "$work/budget" ./bench/budget
  "$work/budget" -berth "$work/berth" -postgres "$BERTH_TEST_POSTGRES"
fi
