#!/usr/bin/env bash
# Measures create→ready of engineer sandboxes and create→started of agent
# runs against a bare `podman run` of the same image, and an engineer
# sandbox claimed from a warm pool against a cold create of the same image
# and size (bench/start/main.go says what is timed). It runs a scratch
# gateway on the podman driver over the images `make images` built, with
# warm pools on and one class, standard-warm (examples/sandboxes.yaml's
# standard with warm: 2), and prints medians and ratios.
#
# The agent sandboxes are real agent runs: the gateway runs claude-code
# (BERTH_RUNNER_IMAGES) on the scripted model served inside it (an
# inference catalog of one scripted provider answering one text turn), on
# bench/repo, a one-commit repository on the local forge that the scratch
# organisation may use, so the checkout, the prompt file and the agent
# image are on the measured path. Runs join an allowlist network of their
# own (berth admin agent-network: root and iptables; a bridge and subnet
# no other gateway's, taken away at the end), as they do by default; the
# baseline joins it too.
#
# Everything it makes is removed on exit, failed or not: the sandboxes
# (terminated, which removes their containers, volumes and checkouts), the
# baseline's containers, the warm pool and the network.
#
#   bench/start.sh [-n RUNS]
export BERTH_SANDBOX_WARM=on
bench_reach=1
runner_image=localhost/berth-agent-claude-code:latest
hex=$(od -An -N4 -tx1 /dev/urandom | tr -d ' \n')
# A bridge and subnet of their own: internal/e2e's allowlist networks take
# 10.89.100–199.0/24, the default one 10.89.78.0/24.
bridge=bsb$hex subnet=10.89.$((200 + 0x${hex:0:2} % 50)).0/24
export BERTH_RUNNER_IMAGES=claude-code=$runner_image BERTH_AGENT_RUNNER=claude-code \
  BERTH_SANDBOX_PODMAN_AGENT_NETWORK=berth-bench-$hex
network_made= bench_pid=
bench_before_serve() {
  export BERTH_INFERENCE_FILE=$work/inference.yaml
  cat >"$BERTH_INFERENCE_FILE" <<'EOF'
providers:
  - {name: scripted, kind: scripted, script: text}
models:
  - {id: scripted, provider: scripted, price: {input: 3, output: 15}}
EOF
}
# At every exit, also a failed or stopped one: what the benchmark made. Pools
# outlive their gateway by design, so this one's is emptied before it stops.
bench_cleanup() {
  local ids id
  ids=$("$work/berth" sandbox list -o json 2>/dev/null | grep -o '"id": *"sbx_[^"]*"' | sed 's/.*"\(sbx_[^"]*\)"/\1/' || true)
  for id in $ids; do "$work/berth" sandbox terminate "$id" >/dev/null 2>&1 || true; done
  if [ -n "$bench_pid" ]; then
    local bare
    bare=$(pm ps -a -q --filter "name=bench-bare-[a-z]+-$bench_pid-")
    [ -z "$bare" ] || pm rm -f -t 0 $bare >/dev/null
  fi
  if [ -f "$work/warm.yaml" ]; then
    sed -i 's/warm: 2/warm: 0/' "$work/warm.yaml"
    "$work/berth" sandbox apply -f "$work/warm.yaml" >/dev/null
    local emptied=
    for _ in $(seq 1 300); do
      [ -z "$(pm ps -a -q --filter label=berth.class=standard-warm --filter label=berth.pool)" ] && { emptied=1; break; }
      sleep 0.1
    done
    [ -n "$emptied" ] || echo "bench: the warm pool was not emptied" >&2
  fi
  if [ -n "$network_made" ]; then
    "$work/berth" admin agent-network --remove --bridge "$bridge" >/dev/null ||
      echo "bench: the allowlist network $BERTH_SANDBOX_PODMAN_AGENT_NETWORK was not removed" >&2
  fi
}
pm() { CONTAINERS_CONF=$root/containers.conf CONTAINERS_STORAGE_CONF=$root/storage.conf podman "$@"; }
source "$(dirname "$0")/lib.sh" start
pm image exists "$runner_image" || { echo "no $runner_image in $root: run make images first" >&2; exit 1; }
network_made=1
"$work/berth" admin agent-network --bridge "$bridge" --subnet "$subnet" >/dev/null
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
git init -q -b main "$work/repo"
git -C "$work/repo" -c user.name=bench -c user.email=bench@example.com commit -q --allow-empty -m init
"$work/berth" repo import bench/repo "$work/repo" >/dev/null
"$work/berth" guardrail set --allowed-repos bench >/dev/null
"$work/bench" -podman-root "$root" -ssh-key "$work/key.pub" -warm-class standard-warm \
  -agent-image "$runner_image" -runner claude-code -model scripted \
  -agent-network "$BERTH_SANDBOX_PODMAN_AGENT_NETWORK" -repo "$work/repo" -checkouts "$work/bare" "$@" &
# In the background so that its pid names its baseline's containers for
# bench_cleanup; a background job ignores ^C, so it is passed on.
bench_pid=$!
trap 'kill -TERM "$bench_pid" 2>/dev/null || true; wait "$bench_pid" || true; exit 130' INT TERM
wait "$bench_pid"
