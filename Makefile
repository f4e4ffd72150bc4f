# karpfunc — the two commands a newcomer needs are `make demo` and `make test`.
SHELL := /usr/bin/env bash
GO ?= go
BIN := $(CURDIR)/bin
# Handler binary for the Functions package: Linux amd64 (Flex Consumption).
PACKAGE_GOOS ?= linux
PACKAGE_GOARCH ?= amd64
# The relay image's tag: the chart's appVersion.
RELAY_VERSION := $(shell sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}/\1/p' relay/chart/Chart.yaml)

.PHONY: all tools lint-tools build demo test lint unit e2e soak bench bench-scale bench-burst bench-quota package image generate vet clean

all: build

## tools: build etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok and golangci-lint from source (cached per user)
tools:
	@hack/tools.sh

## lint-tools: golangci-lint alone, all `make lint` needs
lint-tools:
	@hack/tools.sh golangci-lint

## build: the handler, relay, local Functions host and CLI into bin/
build:
	@mkdir -p $(BIN)
	$(GO) build -o $(BIN)/handler ./functions
	$(GO) build -o $(BIN)/relay ./relay
	$(GO) build -o $(BIN)/funchost ./cmd/funchost
	$(GO) build -o $(BIN)/karpfunc ./cmd/karpfunc

## demo: the whole loop on a local control plane: 50 pending pods to running nodes (DEMO_FLAGS="-nodepool examples/nodepool-arm64.yaml": arm64 only)
demo: tools build
	$(GO) build -o $(BIN)/karpfunc-demo ./hack/demo
	$(BIN)/karpfunc-demo $(DEMO_FLAGS)

## test: the lint gate, unit tests and the end-to-end tests on a real local control plane
test: tools lint
	$(GO) test -count=1 -timeout 50m -parallel 3 ./...

## lint: go vet over everything, golangci-lint (.golangci.yml: gocyclo, unparam, errorlint, revive) over production code,
## and hack/repocheck over the git index (no executable, no file over 1 MiB outside testdata/, every document link resolves)
lint: lint-tools
	$(GO) run ./hack/repocheck
	$(GO) vet ./...
	$(BIN)/golangci-lint run ./...

## unit: every package's tests that need no control plane, in seconds to minutes. -short skips each test
## that starts one (internal/testenv.ControlPlane, internal/controlplane's and relay/internal/watch's helpers,
## tests/); those run in `make test`
unit:
	$(GO) test -count=1 -short ./...

e2e: tools
	$(GO) test -count=1 -timeout 30m -v ./tests/...

## soak: the chaos test and the differential test against Karpenter on more seeds than `make test` runs
soak: tools
	KARPFUNC_CHAOS_SEEDS=$$(seq -s, 1 20) KARPFUNC_CHAOS_ROUNDS=5 $(GO) test -count=1 -timeout 90m -v -run TestChaos ./tests/
	KARPFUNC_DIFF_SCENARIOS=5000 $(GO) test -count=1 -timeout 30m -run TestDifferential ./pkg/scheduler/differential/

## bench: Go benchmarks with allocations
bench:
	$(GO) test -run '^$$' -bench . -benchmem ./pkg/... ./cmd/karpfunc/

## bench-scale: passes and `karpfunc plan` at AKS's limits (5,000 nodes, 150,000 pods) on the
## local control plane; not part of `make test`. BENCH_SCALE_FLAGS="-nodes 500 -pods 15000 -pending 200" for a quick run
bench-scale: tools
	$(GO) build -o $(BIN)/benchscale ./hack/benchscale
	$(BIN)/benchscale $(BENCH_SCALE_FLAGS)

## bench-burst: the demo's loop with one Deployment of 1,000 replicas on an empty cluster: the
## time from its creation to all pods Running, with the breakdown (first NodeClaim, all created,
## launched, registered, Nodes Ready, pods bound, Running); not part of `make test`.
## BENCH_BURST_FLAGS="-pods 200" for a quick run
bench-burst: tools
	$(GO) build -o $(BIN)/karpfunc-demo ./hack/demo
	$(BIN)/karpfunc-demo -pods 1000 -trace $(BENCH_BURST_FLAGS)

## bench-quota: a 200-pod burst under tight quota (the two cheapest D families at 16 vCPUs, regional 64,
## spot 32), quota awareness off then on: creates refused, time to all Running, fleet price; not part of `make test`
bench-quota: tools
	$(GO) run ./hack/benchquota $(BENCH_QUOTA_FLAGS)

## package: the Functions app as azd deploys it: dist/app (host.json, function folders,
## Linux handler) and the same tree zipped as dist/karpfunc-functions.zip
package:
	@rm -rf dist/app dist/karpfunc-functions.zip && mkdir -p dist/app
	GOOS=$(PACKAGE_GOOS) GOARCH=$(PACKAGE_GOARCH) CGO_ENABLED=0 $(GO) build -trimpath -o dist/app/handler ./functions
	cp host.json dist/app/
	for f in functions/*/function.json; do d=$$(basename $$(dirname $$f)); mkdir -p dist/app/$$d; cp $$f dist/app/$$d/; done
	$(GO) run ./hack/zipdir dist/app dist/karpfunc-functions.zip
	@ls -la dist dist/app

## image: the relay's multi-platform container image as an OCI layout tarball, without Docker
## (IMAGE_PUSH=registry/repo:tag also pushes it with ~/.docker/config.json credentials)
image:
	$(GO) run ./hack/image -out dist/relay-image.tar -tag $(RELAY_VERSION) $(if $(IMAGE_PUSH),-push $(IMAGE_PUSH))

## generate: deepcopy and CRDs (controller-gen), and the CRDs copied into the relay chart
generate:
	$(GO) generate ./pkg/...
	$(GO) run ./hack/chartcrds relay/chart/crds

vet:
	$(GO) vet ./...

clean:
	rm -rf bin dist
