#!/usr/bin/env bash
# Measures create→ready of engineer and agent sandboxes against a bare
# `podman run` of the same image, and an engineer sandbox claimed from a
# warm pool against a cold create of the same image and size
# (bench/start/main.go says what is timed). It runs a scratch gateway on
# the podman driver over the images `make images` built, with warm pools
# on and one class, standard-warm (examples/sandboxes.yaml's standard with
# warm: 2), and prints medians and ratios. The agent sandboxes work on
# bench/repo, a one-commit repository on the local forge that the scratch
# organisation may use.
#
#   bench/start.sh [-n RUNS]
export BERTH_SANDBOX_WARM=on
bench_reach=1
source "$(dirname "$0")/lib.sh" start
cat >"$work/warm.yaml" <<'EOF'
sandboxes:
  - name: standard-warm
    image: localhost/berth-sandbox:latest
    isolation: standard
    cpu: "2"
    memory: 4Gi
    default_ttl: 8h
    max_ttl: 24h
    purposes: [engineer]
    warm: 2
EOF
"$work/berth" sandbox apply -f "$work/warm.yaml" >/dev/null
# Pools outlive their gateway by design: empty this one's before it stops.
bench_cleanup() {
  sed -i 's/warm: 2/warm: 0/' "$work/warm.yaml"
  "$work/berth" sandbox apply -f "$work/warm.yaml" >/dev/null
  for _ in $(seq 1 300); do
    [ -z "$(CONTAINERS_CONF=$root/containers.conf CONTAINERS_STORAGE_CONF=$root/storage.conf \
      podman ps -a -q --filter label=berth.class=standard-warm --filter label=berth.pool)" ] && return
    sleep 0.1
  done
  echo "bench: the warm pool was not emptied" >&2
}
git init -q -b main "$work/repo"
git -C "$work/repo" -c user.name=bench -c user.email=bench@example.com commit -q --allow-empty -m init
"$work/berth" repo import bench/repo "$work/repo" >/dev/null
"$work/berth" guardrail set --allowed-repos bench >/dev/null
"$work/bench" -podman-root "$root" -ssh-key "$work/key.pub" -warm-class standard-warm "$@"
