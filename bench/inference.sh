#!/usr/bin/env bash
# Measures what the gateway adds to streamed model requests, one at a time
# and 64 at once, against the scripted model server (berth-model) in a
# process of its own as the upstream (bench/inference/main.go says what is
# timed and how). It builds berth and berth-model from this tree, runs a
# scratch `berth serve` on an SQLite file in front of berth-model, and
# prints medians of the added latency with the machine's load; with
# BERTH_BENCH_REPORT set, each figure is also appended there for bench/all.
# -base runs a second gateway of another berth build beside this one, its
# requests taking turns with the others (before and after in one run).
#
#   bench/inference.sh [-base BERTH_BINARY] [-n RUNS] [-requests N] [-paced-requests N] [-clients 1,64] [-load burst,paced]
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go build -o "$work/berth" ./cmd/berth
go build -o "$work/berth-model" ./cmd/berth-model
go build -o "$work/bench" ./bench/inference
"$work/bench" -berth "$work/berth" -model "$work/berth-model" "$@"
