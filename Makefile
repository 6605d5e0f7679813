# skein — make targets. `make` alone lists them.

GO          ?= go
BIN         := bin/skein
VERSION     ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS     := -X github.com/skein-dev/skein/structs.Version=$(VERSION)
# go-nvml's nvml.h declares deprecated functions; keep cgo builds quiet.
export CGO_CFLAGS ?= -Wno-deprecated-declarations
# Route raft, raft-boltdb and memberlist metrics to one registry
# (docs/development.md, "The hashicorpmetrics build tag").
TAGS        := hashicorpmetrics
# Every package but gpu builds and tests without cgo; agent/metrics is
# tested with cgo, so that its GPU test over go-nvml's mocks runs.
CGO_PKGS     := ./gpu/ ./agent/metrics/
# go test starts packages in the order given, two at a time on two
# cores: agent, the longest, comes first and the rest run beside it;
# internal/e2e starts after cli and cluster, when agent's clusters are
# mostly done, since its agent processes keep their real timings and
# must not starve; the small packages fill the end.
NOCGO_PKGS   = ./agent/ ./cli/ ./cluster/ ./internal/e2e/ $(shell $(GO) list ./... | grep -v -e '/gpu$$' -e '/agent/metrics$$' \
	-e '/agent$$' -e '/internal/e2e$$' -e '/cli$$' -e '/cluster$$')
# Tests of agents and clusters mostly wait (elections, failure detection,
# timeouts): each package runs this many of its parallel tests at once
# (go test's default is one per core). 8 was faster, but on two cores
# shared with other builds it starved the in-process clusters' tight
# Raft timings into elections their tests do not expect.
PARALLEL    ?= 4
# make race: the race detector (which needs cgo) over every package but
# three: agent, whose tests start whole clusters in one process (ten
# minutes without the detector; each of its parts is in the set), and
# internal/e2e and chaos, whose agents are separate processes or
# containers the detector cannot see into.
RACE_PKGS    = $(shell $(GO) list ./... | grep -v -e '/agent$$' -e '/internal/e2e$$' -e '/chaos$$')
# The container image (chaos/Dockerfile), built FROM scratch without network.
DOCKER      ?= docker
IMAGE       ?= skein:dev
BUSYBOX     ?= /bin/busybox
IMAGE_CTX   := bin/image
# make install: where, and whether to add Slurm's command names as links.
PREFIX      ?= /usr/local
SLURM_LINKS ?=
SLURM_CMDS  := squeue scancel sinfo sacct sbatch scontrol salloc srun

.DEFAULT_GOAL := help
.PHONY: help build build-static install run test test-short race lint check bench image demo-up demo-down chaos chaos-short clean

help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  make %-12s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

build: ## build bin/skein (with NVML support; needs gcc)
	$(GO) build -tags $(TAGS) -ldflags '$(LDFLAGS)' -o $(BIN) .

build-static: ## build a static bin/skein without NVML (CGO_ENABLED=0)
	CGO_ENABLED=0 $(GO) build -tags $(TAGS) -ldflags '$(LDFLAGS)' -o $(BIN) .

install: ## install bin/skein as PREFIX/bin/skein (PREFIX=/usr/local; SLURM_LINKS=1 adds squeue, scancel, sinfo, sacct, sbatch, scontrol, salloc, srun links)
	@test -x $(BIN) || { echo "make install: no $(BIN): run make build (or make build-static) first" >&2; exit 1; }
	install -d $(DESTDIR)$(PREFIX)/bin
	install -m 0755 $(BIN) $(DESTDIR)$(PREFIX)/bin/skein
	@if [ -n "$(SLURM_LINKS)" ]; then for c in $(SLURM_CMDS); do \
		ln -sf skein $(DESTDIR)$(PREFIX)/bin/$$c && echo "$(DESTDIR)$(PREFIX)/bin/$$c -> skein"; done; fi

run: build ## start a dev agent: one node, loopback, simulated GPUs if no NVML
	./$(BIN) agent --dev

test: ## run every test: gpu and agent/metrics with cgo (NVML mocks), the rest with CGO_ENABLED=0
	$(GO) build -tags $(TAGS) ./...
	$(GO) test -tags $(TAGS) -count=1 -timeout 5m $(CGO_PKGS)
	CGO_ENABLED=0 $(GO) test -tags $(TAGS) -count=1 -parallel $(PARALLEL) -timeout 15m $(NOCGO_PKGS)

test-short: ## the edit loop's tier: every package with -short (the longest cluster tests skip)
	$(GO) test -tags $(TAGS) -short -count=1 -timeout 5m $(CGO_PKGS)
	CGO_ENABLED=0 $(GO) test -tags $(TAGS) -short -count=1 -parallel $(PARALLEL) -timeout 10m $(NOCGO_PKGS)

race: ## the race detector over the packages with concurrent code (RACE_PKGS says which and why)
	$(GO) test -tags $(TAGS) -race -count=1 -timeout 20m $(RACE_PKGS)

lint: ## gofmt and go vet
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet -tags $(TAGS) ./...

check: lint test ## lint and the tests (what CI runs)

bench: ## run the benchmarks (record figures in BENCHMARKS.md)
	CGO_ENABLED=0 $(GO) test -tags $(TAGS) -run '^$$' -bench . -benchtime 1x ./sched/ ./agent/

image: ## build the container image skein:dev (static skein, skein-workload, busybox-static)
	@if [ ! -x $(BUSYBOX) ] || ldd $(BUSYBOX) >/dev/null 2>&1; then \
		echo "make image: $(BUSYBOX) is missing or not static; install it with: apt-get install busybox-static" >&2; exit 1; fi
	rm -rf $(IMAGE_CTX) && mkdir -p $(IMAGE_CTX)
	CGO_ENABLED=0 $(GO) build -tags $(TAGS) -ldflags '$(LDFLAGS)' -o $(IMAGE_CTX)/skein .
	CGO_ENABLED=0 $(GO) build -o $(IMAGE_CTX)/skein-workload ./chaos/workload
	cp $(BUSYBOX) $(IMAGE_CTX)/busybox
	$(DOCKER) build -q -t $(IMAGE) -f chaos/Dockerfile $(IMAGE_CTX)

demo-up: ## start a 3-node cluster in containers skein-a, skein-b, skein-c (after make image)
	SKEIN_DEMO_IMAGE=$(IMAGE) chaos/demo.sh up

demo-down: ## remove the demo's containers and network
	chaos/demo.sh down

chaos-short: ## the short chaos run: 3 nodes, ~6 faults (needs Docker and busybox-static; SKEIN_CHAOS_SEED replays)
	@if [ ! -x $(BUSYBOX) ] || ldd $(BUSYBOX) >/dev/null 2>&1; then \
		echo "make chaos-short: $(BUSYBOX) is missing or not static; install it with: apt-get install busybox-static" >&2; exit 1; fi
	SKEIN_CHAOS=short CGO_ENABLED=0 $(GO) test -tags $(TAGS) -run TestChaos -timeout 30m -count=1 -v ./chaos/

chaos: ## the long chaos run: 5 nodes, ~30 faults, every nemesis (needs Docker; failures kept in chaos/results/SEED)
	@if [ ! -x $(BUSYBOX) ] || ldd $(BUSYBOX) >/dev/null 2>&1; then \
		echo "make chaos: $(BUSYBOX) is missing or not static; install it with: apt-get install busybox-static" >&2; exit 1; fi
	SKEIN_CHAOS=long CGO_ENABLED=0 $(GO) test -tags $(TAGS) -run TestChaos -timeout 60m -count=1 -v ./chaos/

clean: ## remove build output
	rm -rf bin
