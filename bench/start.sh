#!/usr/bin/env bash
# Measures create→ready of engineer and agent sandboxes against a bare
# `podman run` of the same image (bench/start/main.go says what is timed).
# It runs a scratch gateway on the podman driver over the images `make
# images` built, and prints medians and ratios. The agent sandboxes work on
# bench/repo, a one-commit repository on the local forge that the scratch
# organisation may use.
#
#   bench/start.sh [-n RUNS]
source "$(dirname "$0")/lib.sh" start
git init -q -b main "$work/repo"
git -C "$work/repo" -c user.name=bench -c user.email=bench@example.com commit -q --allow-empty -m init
"$work/berth" repo import bench/repo "$work/repo" >/dev/null
"$work/berth" guardrail set --allowed-repos bench >/dev/null
"$work/bench" -podman-root "$root" -ssh-key "$work/key.pub" "$@"
