# kmirror build, test and lint entry points. `make test` is the README's test
# command and what CI runs (.ci/run): it installs what it needs first.
SHELL := /bin/bash
GO ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
LDFLAGS := -X github.com/kmirror/kmirror/core/version.Version=$(VERSION) -X github.com/kmirror/kmirror/core/version.Commit=$(COMMIT)
PKGS := ./... github.com/kmirror/kmirror/sdk/...
UNIT_PKGS = $(shell $(GO) list $(PKGS) | grep -v '/e2e')
E2E_TIMEOUT ?= 20m

.PHONY: all build deps generate pyfilter tidy modules-check tutorial-check deploy-check test unit fuzz fuzz-quick e2e compat soak soak-quick lint bench bench-quick bench-go bench-e2e demo docs man clean

all: build

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/kmirror ./cmd/kmirror

deps:
	scripts/install-deps.sh

## generate: the SDK's gRPC code from sdk/proto, and the Python filter
## plugin's (lint fails when either is stale).
generate:
	scripts/gen-proto.sh
	scripts/pyfilter.sh generate

## pyfilter: the Python filter plugin's virtualenv; prints its launcher.
pyfilter:
	@scripts/pyfilter.sh venv

## test: unit tests, every fuzz target for 5 s (fuzz-quick), the plugin
## tutorial and the deployment files' checks, then the e2e suite against real
## Apache Kafka brokers, then `go install` of this commit from a clean module
## cache.
test: deps lint unit fuzz-quick tutorial-check deploy-check e2e modules-check

## tidy: go mod tidy of the daemon's module (the sdk comes from a local proxy).
tidy:
	scripts/modules.sh tidy

## modules-check: sdk/ is the version go.mod requires, and `go install
## github.com/kmirror/kmirror/cmd/kmirror@<this commit>` works from a clean
## module cache (scripts/modules.sh; docs/testing.md).
modules-check:
	scripts/modules.sh check

## tutorial-check: the plugin tutorial's module (examples/plugins/group-filter,
## docs/writing-plugins.md) tested and built as a third party builds it, then
## run through the plugin host (scripts/tutorial.sh).
tutorial-check:
	scripts/tutorial.sh check

## deploy-check: the deployment files in deploy/ (dashboard, alert rules,
## Kubernetes manifests, Helm chart, systemd unit, Dockerfile), checked by
## their own Go module deploy/check and systemd-analyze (scripts/deploy-check.sh).
deploy-check:
	scripts/deploy-check.sh

## unit: Go unit tests, and the Python filter plugin's own tests.
unit:
	scripts/pyfilter.sh test
	$(GO) test -count=1 -race -timeout 10m $(UNIT_PKGS)

## fuzz: every Go fuzz target of both modules for FUZZTIME each
## (scripts/fuzz.sh; docs/testing.md, "Fuzzing"). FUZZ=REGEX picks targets.
FUZZTIME ?= 10s
FUZZ ?=
fuzz:
	FUZZTIME=$(FUZZTIME) scripts/fuzz.sh '$(FUZZ)'

## fuzz-quick: every fuzz target for 5 s (what `make test` runs).
fuzz-quick:
	FUZZTIME=5s scripts/fuzz.sh

## e2e: every package under e2e/ against real Apache Kafka brokers, the
## authentication mechanisms against a real KDC (e2e/auth), the source
## compatibility matrix (e2e/compat, every version), the destination faults
## on a 3-broker destination (e2e/destfaults; its disk-full test mounts a
## tmpfs, so it needs root and skips without), the group membership on a
## real coordinator (e2e/membership) and the 2-minute soak (e2e/soak,
## SOAK_DURATION unset) included; go test runs the packages in parallel.
e2e:
	$(GO) test -count=1 -timeout $(E2E_TIMEOUT) -v ./e2e/...

## compat: the source compatibility matrix alone (e2e/compat;
## docs/compatibility.md): kmirror mirroring from Apache Kafka 2.8
## (ZooKeeper), 3.6, 3.9 and 4.4 sources to a 4.4 destination, one source at
## a time. COMPAT_VERSIONS picks the source versions (comma-separated; each
## is resolved from Maven Central on first use).
COMPAT_VERSIONS ?= 2.8.2,3.6.2,3.9.1,4.4.0
compat: deps
	KMIRROR_COMPAT_VERSIONS=$(COMPAT_VERSIONS) $(GO) test -count=1 -timeout $(E2E_TIMEOUT) -v ./e2e/compat/

## soak: kmirror under mixed traffic (transactions committed and aborted,
## plain records) with daemon kills, source broker restarts and network cuts
## for DURATION (e2e/soak; docs/reliability.md); samples RSS, goroutines,
## open files and lag, plots them and fails on growth without bound or a
## record that differs. SOAK_SEED repeats a run's schedule (its log prints
## the seed); SOAK_OUT is where samples.csv, summary.md, the PNG plots and
## kmirror.log go. The test bounds itself (DURATION + 25 minutes), hence no
## go test timeout.
DURATION ?= 10m
SOAK_SEED ?=
SOAK_OUT ?= e2e/artifacts/soak
soak: deps
	SOAK_DURATION=$(DURATION) SOAK_SEED=$(SOAK_SEED) SOAK_OUT=$(abspath $(SOAK_OUT)) $(GO) test -count=1 -timeout 0 -run '^TestSoak$$' -v ./e2e/soak/

## soak-quick: the soak for 2 minutes (about 4 with the clusters' start and
## the final check); `make e2e` runs it too, as part of ./e2e/...
soak-quick:
	$(MAKE) soak DURATION=2m

lint:
	scripts/gen-proto.sh --check
	scripts/pyfilter.sh check
	$(GO) vet $(PKGS)
	$(GO) tool staticcheck $(PKGS)
	@fmt=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$fmt" ]; then echo "gofmt needed on:"; echo "$$fmt"; exit 1; fi

# kmirror against MirrorMaker 2 and the raw limit on real Apache Kafka
# brokers (bench/; docs/benchmarks.md). It resolves MirrorMaker 2's jars
# itself (scripts/mm2/fetch.sh). BENCH_FLAGS adds flags, e.g.
# BENCH_FLAGS='-scenarios p500,p2000 -keep'.
BENCH_FLAGS ?=

## bench: every scenario, full size (tens of minutes); writes
## docs/benchmarks/report.md and its charts.
bench: deps
	$(GO) build -o bin/kmirror-bench ./bench
	bin/kmirror-bench -label "make bench" -profile 10s -out docs/benchmarks $(BENCH_FLAGS)

## bench-quick: a few scenarios, small (under 5 minutes; CI runs it):
## figures printed, report in bench/out/quick. No timing assertion.
bench-quick: deps
	$(GO) build -o bin/kmirror-bench ./bench
	bin/kmirror-bench -quick -label "make bench-quick" -out bench/out/quick $(BENCH_FLAGS)

# Go micro-benchmarks of the hot paths (batch, writer, fetcher, kfake data path).
bench-go:
	$(GO) test -run '^$$' -bench . -benchmem $(UNIT_PKGS)

# End-to-end throughput on real Kafka brokers (the e2e clusters); installs
# the Kafka jars first.
bench-e2e: deps
	$(GO) test -run '^$$' -bench MirrorThroughput -benchtime 1x -timeout 40m ./e2e/

docs:
	$(GO) run ./core/config/gen

## man: a man page per command, generated from the command tree, in bin/man
## (not checked in; cmd/kmirror's tests generate them too).
man:
	$(GO) run ./cmd/kmirror docs man bin/man

clean:
	rm -rf bin
