#!/usr/bin/env bash
# Inference budgets on two gateway replicas sharing a PostgreSQL database
# (bench/budget/main.go says what is measured): the overshoot past a
# budget under bursts, and the latency a budget adds. PostgreSQL is
# BERTH_TEST_POSTGRES, or a throwaway server started durable on port
# BERTH_BENCH_PG_PORT (default 55434).
#
#   bench/budget.sh [-trials N] [-n REQUESTS] [-burst N]
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"
work=$(mktemp -d)
source bench/postgres.sh
cleanup() {
  bench_postgres_stop
  rm -rf "$work"
}
trap cleanup EXIT
go build -o "$work/berth" ./cmd/berth
go build -o "$work/budget" ./bench/budget
bench_postgres
"$work/budget" -berth "$work/berth" -postgres "$BERTH_TEST_POSTGRES" "$@"
