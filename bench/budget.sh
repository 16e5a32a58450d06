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
pgdir=
cleanup() {
  if [ -n "$pgdir" ]; then scripts/test-postgres stop "$pgdir" || true; rm -rf "$pgdir"; fi
  rm -rf "$work"
}
trap cleanup EXIT
go build -o "$work/berth" ./cmd/berth
go build -o "$work/budget" ./bench/budget
if [ -z "${BERTH_TEST_POSTGRES:-}" ]; then
  pgdir=$(mktemp -d /tmp/berth-bench-pg.XXXXXX)
  chmod 755 "$pgdir"
  BERTH_TEST_POSTGRES=$(scripts/test-postgres start "$pgdir" "${BERTH_BENCH_PG_PORT:-55434}")
fi
"$work/budget" -berth "$work/berth" -postgres "$BERTH_TEST_POSTGRES" "$@"
