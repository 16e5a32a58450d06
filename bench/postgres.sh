# Sourced by the benchmarks that need PostgreSQL (bench/all, load.sh,
# budget.sh): bench_postgres sets BERTH_TEST_POSTGRES to a throwaway
# server started durable (fsync and synchronous commit on, its defaults)
# on port BERTH_BENCH_PG_PORT (default 55434), unless it is set already
# (a caller's server, or bench/all's shared by the benchmarks it runs);
# bench_postgres_stop stops the one it started, if any.
bench_pgdir=
bench_postgres() {
  [ -n "${BERTH_TEST_POSTGRES:-}" ] && return 0
  bench_pgdir=$(mktemp -d /tmp/berth-bench-pg.XXXXXX)
  chmod 755 "$bench_pgdir"
  BERTH_TEST_POSTGRES=$(scripts/test-postgres start "$bench_pgdir" "${BERTH_BENCH_PG_PORT:-55434}")
  export BERTH_TEST_POSTGRES
}
bench_postgres_stop() {
  [ -n "$bench_pgdir" ] || return 0
  scripts/test-postgres stop "$bench_pgdir" >/dev/null 2>&1 || true
  rm -rf "$bench_pgdir"
}
