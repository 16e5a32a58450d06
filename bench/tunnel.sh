#!/usr/bin/env bash
# Measures the gateway's tunnel with the real ssh against the same
# sandbox's sshd reached directly (bench/tunnel/main.go says what is
# timed): the throughput of a bulk copy and the time of one `ssh host
# true`, medians and ratios. It runs a scratch gateway on the podman driver
# over the images `make images` built, with one engineer sandbox, and the
# ssh config `berth sandbox config` writes for it.
#
#   bench/tunnel.sh [-n RUNS] [-size MIB]
source "$(dirname "$0")/lib.sh" tunnel
bench_cleanup() { "$work/berth" sandbox terminate bench >/dev/null 2>&1; }
"$work/berth" sandbox create bench --class standard --ssh-key "$work/key.pub" >/dev/null 2>&1
mkdir -p "$work/home"
HOME=$work/home "$work/berth" sandbox config bench >/dev/null
id=$("$work/berth" sandbox show bench -o json | sed -n 's/^  "id": "\(.*\)",$/\1/p')
ip=$(CONTAINERS_CONF=$root/containers.conf CONTAINERS_STORAGE_CONF=$root/storage.conf \
  podman inspect --format '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}' "berth-$id")
"$work/bench" -ssh-config "$work/home/.ssh/config" -host berth-bench -key "$work/key" -direct "$ip" "$@"
