# karpfunc — the two commands a newcomer needs are `make demo` and `make test`.
SHELL := /usr/bin/env bash
GO ?= go
BIN := $(CURDIR)/bin
# Handler binary for the Functions package: Linux amd64 (Flex Consumption).
PACKAGE_GOOS ?= linux
PACKAGE_GOARCH ?= amd64

.PHONY: all tools build demo test unit e2e soak bench package generate vet clean

all: build

## tools: build etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok from source (cached per user)
tools:
	@hack/tools.sh

## build: the handler, relay, local Functions host and CLI into bin/
build:
	@mkdir -p $(BIN)
	$(GO) build -o $(BIN)/handler ./functions
	$(GO) build -o $(BIN)/relay ./relay
	$(GO) build -o $(BIN)/funchost ./cmd/funchost
	$(GO) build -o $(BIN)/karpfunc ./cmd/karpfunc

## demo: the whole loop on a local control plane: 50 pending pods to running nodes
demo: tools build
	$(BIN)/karpfunc demo

## test: unit tests and the end-to-end tests on a real local control plane
test: tools
	$(GO) vet ./...
	$(GO) test -count=1 -timeout 40m ./...

unit:
	$(GO) test -count=1 -short ./pkg/... ./functions/... ./relay/...

e2e: tools
	$(GO) test -count=1 -timeout 30m -v ./tests/...

## soak: the chaos test on more seeds and rounds than `make test` runs
soak: tools
	KARPFUNC_CHAOS_SEEDS=$$(seq -s, 1 20) KARPFUNC_CHAOS_ROUNDS=5 $(GO) test -count=1 -timeout 90m -v -run TestChaos ./tests/

## bench: Go benchmarks with allocations
bench:
	$(GO) test -run '^$$' -bench . -benchmem ./pkg/...

## package: the Functions app zip (host.json, function folders, handler)
package:
	@rm -rf dist/app && mkdir -p dist/app
	GOOS=$(PACKAGE_GOOS) GOARCH=$(PACKAGE_GOARCH) CGO_ENABLED=0 $(GO) build -trimpath -o dist/app/handler ./functions
	cp host.json dist/app/
	for f in functions/*/function.json; do d=$$(basename $$(dirname $$f)); mkdir -p dist/app/$$d; cp $$f dist/app/$$d/; done
	cd dist/app && zip -qr ../karpfunc-functions.zip . 2>/dev/null || (cd dist/app && tar czf ../karpfunc-functions.tar.gz .)
	@ls -la dist

generate:
	$(GO) generate ./pkg/...

vet:
	$(GO) vet ./...

clean:
	rm -rf bin dist
