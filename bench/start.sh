#!/usr/bin/env bash
# Measures create→ready of engineer and agent sandboxes against a bare
# `podman run` of the same image (bench/start/main.go says what is timed).
# It runs a scratch gateway on the podman driver over the images `make
# images` built, and prints medians and ratios.
#
#   bench/start.sh [-n RUNS]
source "$(dirname "$0")/lib.sh" start
"$work/bench" -podman-root "$root" -ssh-key "$work/key.pub" "$@"
