# berth: the two set-up commands are `make up` and `make test` (README.md).
export PATH := /usr/local/go/bin:$(PATH)

.PHONY: build up down test vet

build:
	go build -o bin/berth ./cmd/berth

up:
	./scripts/up

down:
	./scripts/down

vet:
	gofmt -l . | tee /dev/stderr | (! read -r _)
	go vet ./...

test: vet
	go test -race -count=1 ./...
