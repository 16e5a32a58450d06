# berth: the two set-up commands are `make up` and `make test` (README.md).
export PATH := /usr/local/go/bin:$(PATH)

.PHONY: build images editor-image up down test vet

# Where `make up` keeps its state; images are built into its podman root.
BERTH_DEMO_DIR ?= $(CURDIR)/.berth
export BERTH_DATA_DIR ?= $(BERTH_DEMO_DIR)/data

build:
	go build -o bin/berth ./cmd/berth

# The sandbox image, the gateway's own image (localhost/berth:latest) and
# the five agent images (claude-code, pi, codex, opencode, gemini), built
# into the
# podman driver's own store (the root `berth admin podman-env` names), from
# Debian packages and the npm registry: no container registry.
images: build
	eval "$$(bin/berth admin podman-env)" && images/build && images/build gateway && images/build agent claude-code pi codex opencode gemini

# The editor class image localhost/berth-editor:latest (code-server, FROM
# the sandbox image: `make images` first). Not in `make images`: it compiles
# code-server's native modules and is large (README, The sandbox image).
editor-image: build
	eval "$$(bin/berth admin podman-env)" && images/build editor

up:
	./scripts/up

down:
	./scripts/down

vet:
	@unformatted=$$(gofmt -l .); if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted"; exit 1; fi
	go vet ./...

# The end-to-end package runs real gateways, podman sandboxes and a real
# cluster: past go test's default 10 minutes on a busy two-core machine.
test: vet
	go test -race -count=1 -timeout 30m ./...
