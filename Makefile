# rollout-guard: the two commands a newcomer needs are `make run` and `make test`.

SHELL := /usr/bin/env bash -o pipefail
ROOT  := $(CURDIR)
BIN   := $(ROOT)/bin
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)
GO_TEST_FLAGS ?=

# Every step of make test (lint, unit, each tool build, e2e…) starts with a
# timestamped line and the time since make started, so that a CI log shows
# where the time goes: a step takes the gap to the next line. make test
# ends with its total. Sub-makes keep the first make's start.
ifndef MAKE_START
MAKE_START := $(shell date +%s)
endif
export MAKE_START
step = @printf '==> %s +%ss make %s\n' "$$(date -u +%H:%M:%S)" "$$(( $$(date +%s) - $(MAKE_START) ))" "$(1)"

.PHONY: all
all: build

.PHONY: help
help: ## Show the targets.
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk 'BEGIN{FS=":.*## "}{printf "  %-12s %s\n", $$1, $$2}'

# make run's driver, hack/tools/makerun (below, at run), built first by the
# targets that use it.
MAKERUN := $(BIN)/makerun
.PHONY: makerun
makerun:
	@cd hack/tools && go build -o $(MAKERUN) ./makerun

.PHONY: tools
tools: makerun ## Build kube-apiserver, etcd and kubectl from source into bin/ (skipped when up to date).
	$(call step,$@)
	$(MAKERUN) --root $(ROOT) --bin-dir $(BIN) --tools-only

.PHONY: monitoring-tools
# Only the monitoring tests (test/monitoring) run promtool and
# kube-state-metrics: make e2e builds them, make run does not.
monitoring-tools: ## Build promtool and kube-state-metrics from source into bin/ (skipped when up to date).
	$(call step,$@)
	hack/tools/install-monitoring.sh $(BIN)

.PHONY: cert-manager-tools
cert-manager-tools: ## Build cert-manager's controller and CA injector from source into bin/, at the version hack/tools/cert-manager pins (skipped when up to date).
	$(call step,$@)
	hack/tools/install-cert-manager.sh $(BIN)

.PHONY: node-tools
# The test environment's node (test/framework, Node; test/node) runs Pods on
# this machine: containerd, runc, the CNI plugins and iptables (installed
# with apt when missing; needs root), and kubelet, kube-controller-manager,
# kube-scheduler and the sandbox image bin/pause-image.tar, built from source.
node-tools: ## Install containerd, runc, CNI plugins (apt) and build kubelet, kube-controller-manager, kube-scheduler and the pause image into bin/.
	$(call step,$@)
	hack/tools/install-node.sh $(BIN)

.PHONY: clusterctl
# clusterctl at the Cluster API version the test module pins (a tool of
# test/go.mod), for the tests that run it as operators do (test/clusterctl)
# and for moving the sandbox's clusters. go build's cache makes a second run
# quick.
clusterctl: ## Build bin/clusterctl from the Cluster API module the tests pin.
	$(call step,$@)
	cd test && go build -o $(BIN)/clusterctl sigs.k8s.io/cluster-api/cmd/clusterctl

.PHONY: capi-core
# Cluster API's core manager (sigs.k8s.io/cluster-api/core, a tool of
# test/go.mod) at the version the test module pins, for the sandbox's
# Runtime SDK mode (sandbox --runtime-sdk, sandbox.Options.RuntimeSDK), which
# runs it as its own process instead of the core controllers in-process.
# Rebuilt only when the test module's pins change.
capi-core: $(BIN)/capi-core ## Build bin/capi-core, Cluster API's core manager, from the Cluster API module the tests pin (skipped when up to date).

$(BIN)/capi-core: test/go.mod test/go.sum
	$(call step,capi-core)
	cd test && go build -ldflags "-X sigs.k8s.io/cluster-api/version.gitVersion=$$(go list -m -f '{{.Version}}' sigs.k8s.io/cluster-api)" \
		-o $(BIN)/capi-core sigs.k8s.io/cluster-api/core

.PHONY: capi-kcp
# Cluster API's kubeadm control plane manager
# (sigs.k8s.io/cluster-api/controlplane/kubeadm, a tool of test/go.mod) at
# the version the test module pins, for the sandbox's in-place updates
# (sandbox --in-place-updates, sandbox.Options.InPlaceUpdates), which run it
# as its own process instead of the KubeadmControlPlane controller
# in-process. Rebuilt only when the test module's pins change.
capi-kcp: $(BIN)/capi-kcp ## Build bin/capi-kcp, Cluster API's kubeadm control plane manager, from the Cluster API module the tests pin (skipped when up to date).

$(BIN)/capi-kcp: test/go.mod test/go.sum
	$(call step,capi-kcp)
	cd test && go build -ldflags "-X sigs.k8s.io/cluster-api/version.gitVersion=$$(go list -m -f '{{.Version}}' sigs.k8s.io/cluster-api)" \
		-o $(BIN)/capi-kcp sigs.k8s.io/cluster-api/controlplane/kubeadm

.PHONY: build
build: ## Build bin/webhook and bin/rollout.
	$(call step,$@)
	go build -ldflags "$(LDFLAGS)" -o $(BIN)/webhook ./cmd/webhook
	go build -ldflags "$(LDFLAGS)" -o $(BIN)/rollout ./cmd/rollout

.PHONY: build-race
# The guard built with the race detector, for the end-to-end tests that run
# it (env.WithRaceGuard, framework.Options.GuardRace): a data race in the
# guard while they run fails them. It reuses the race-instrumented packages
# make unit built.
build-race: ## Build bin/webhook-race: the guard with the race detector, for the end-to-end tests that run it.
	$(call step,$@)
	go build -race -ldflags "$(LDFLAGS)" -o $(BIN)/webhook-race ./cmd/webhook

.PHONY: generate
# controller-gen writes the DeepCopy methods of the CLI's output types
# (rollout/api/v1alpha1/zz_generated.deepcopy.go) and of the stored API
# (api/v1alpha1), and the stored API's CRD (config/crd); run it after
# changing them.
CONTROLLER_GEN ?= go run sigs.k8s.io/controller-tools/cmd/controller-gen@v0.23.0
generate: ## Regenerate the DeepCopy methods of rollout/api/v1alpha1 and api/v1alpha1, and config/crd.
	$(CONTROLLER_GEN) object paths=./rollout/api/v1alpha1/...
	$(CONTROLLER_GEN) object crd paths=./api/v1alpha1/... output:crd:dir=config/crd/bases

.PHONY: docs
# The CLI reference (docs/reference/cli) is generated from the rollout
# command tree, one page per command with its flags, examples and exit
# status. make unit runs the package docs' tests: TestCLIReferenceIsCurrent
# fails when the checked-in pages are stale, TestLinksResolve when a
# relative link or #anchor of docs/ or README.md leads nowhere.
docs: ## Regenerate the CLI reference in docs/reference/cli from the command tree.
	go test ./docs/ -count=1 -run '^TestCLIReferenceIsCurrent$$' -update

.PHONY: lint
# go vet type-checks a package against its dependencies' compiled export
# data, so it compiles every dependency of what it vets. hack/tools/cmd/*
# are ten-line mains around Kubernetes' own commands (kube-apiserver,
# kubelet…): vetting them would compile most of Kubernetes (2,890 packages
# for hack/tools' ./... against 467 for its own code), so lint vets the
# rest of hack/tools and the tool targets compile those mains. The test
# module's dependencies are the ones its tests compile anyway: go's cache
# shares them between lint and e2e.
HACK_TOOLS_VET = $$(go list ./... | grep -v '/hack/tools/cmd/')
lint: ## gofmt and go vet over every module (hack/tools: its own code, not the mains of the Kubernetes commands it builds).
	$(call step,$@)
	@out="$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './bin/*'))"; \
	  if [[ -n "$$out" ]]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi
	go vet ./...
	cd hack/tools && go vet $(HACK_TOOLS_VET)
	cd test && go vet ./...

.PHONY: unit
# -race: several unit tests exist to catch races (history's prune and memo
# tests, arming, the CLI's status watch); without the race detector they
# pass whatever the code does. The second line tests the image and
# release builders of hack/tools (no race detector: they drive the go
# command and write files, and it would rebuild their dependencies): they
# cross-compile the product's binaries into bin/cross-test, which go test's
# cache does not track (-count=1), one package at a time so that the second
# reuses the first's builds (-p 1). The first run on a machine compiles the
# product for four platforms (minutes); later runs relink nothing.
unit: ## Unit tests of the product module (pure logic; no API server) with the race detector, and of the image and release builders and make run's driver.
	$(call step,$@)
	go test -race $(GO_TEST_FLAGS) ./...
	cd hack/tools && go test -count=1 -p 1 $(GO_TEST_FLAGS) -timeout 20m ./internal/... ./image/... ./release/... ./makerun/...

.PHONY: e2e
# -count=1: these tests exercise bin/webhook, a file go test's cache does not
# track, so a cached pass could hide a change of the guard. test/e2e's
# concurrent writers run bin/webhook-race (env.WithRaceGuard): a race the
# detector reports in the guard fails the test.
e2e: tools monitoring-tools node-tools cert-manager-tools clusterctl capi-core capi-kcp build build-race ## End-to-end tests through a real kube-apiserver and the guard over TLS (concurrent writers with the race-enabled guard).
	$(call step,$@)
	cd test && go test -count=1 $(GO_TEST_FLAGS) -timeout 30m ./...

.PHONY: test
test: lint unit fuzz-smoke e2e ## Everything CI checks: lint, unit tests, a short run of every fuzz target, end-to-end tests.
	$(call step,test done)

# Fuzz targets of the product module, as package:target.
FUZZ_TARGETS := ./skew:FuzzParseVersion ./revisions:FuzzFromRolloutRevision \
	./webhooks:FuzzKubeadmControlPlaneAdmission ./webhooks:FuzzStamper ./webhooks:FuzzAdmissionReview
# make test bounds each target by a number of executions, not by time: on a
# busy machine a time-bounded run can end inside a slow worker start and
# report "context deadline exceeded" without any input failing.
FUZZ_SMOKE_TIME ?= 3000x
FUZZ_TIME ?= 5m

.PHONY: fuzz-smoke
fuzz-smoke: ## Run every fuzz target for $(FUZZ_SMOKE_TIME) executions (part of make test).
	$(call step,$@)
	@for t in $(FUZZ_TARGETS); do pkg=$${t%%:*}; fn=$${t##*:}; \
	  echo "fuzz $$fn ($$pkg, $(FUZZ_SMOKE_TIME))"; \
	  go test -run '^$$' -fuzz "^$$fn$$" -fuzztime $(FUZZ_SMOKE_TIME) -parallel 1 $$pkg || exit 1; done

.PHONY: fuzz
fuzz: ## Run every fuzz target for $(FUZZ_TIME); new failing inputs land in testdata/fuzz of their package.
	@for t in $(FUZZ_TARGETS); do pkg=$${t%%:*}; fn=$${t##*:}; \
	  echo "fuzz $$fn ($$pkg, $(FUZZ_TIME))"; \
	  go test -run '^$$' -fuzz "^$$fn$$" -fuzztime $(FUZZ_TIME) $$pkg || exit 1; done

# make bench runs every benchmark of docs/benchmarks.md; each part writes its
# raw output under bench/ (git-ignored) so that benchstat can compare runs,
# and its figures into one section of bench/summary.json (every ratio with
# its spread over rounds, memory, boot time, CLI figures, the machine and its
# load). test/bench/summary.json is a copy of the summary the docs quote;
# test/cmd/bench-summary checks that they quote it exactly.
BENCH_DIR := $(ROOT)/bench
BENCH_SUMMARY := $(BENCH_DIR)/summary.json

.PHONY: bench
bench: ## Every benchmark of docs/benchmarks.md; raw output in bench/, figures in bench/summary.json.
	@mkdir -p $(BENCH_DIR)
	rm -f $(BENCH_SUMMARY)
	$(MAKE) bench-handlers bench-admission bench-scale bench-cli bench-rollout
	@echo "figures: $(BENCH_SUMMARY) (copy it to test/bench/summary.json with the docs that quote it)"

.PHONY: bench-handlers
bench-handlers: ## Go benchmarks of the policy, the handlers, revision encoding and the memory of the caches, and Cluster API's KCP webhook as reference (benchstat-friendly, bench/handlers.txt).
	@mkdir -p $(BENCH_DIR)
	go test -run '^$$' -bench . -benchmem -count 6 ./... | tee $(BENCH_DIR)/handlers.txt
	cd test && go test -run '^$$' -bench . -benchmem -count 6 ./bench/handlers/ ./cmd/bench-scale/ | tee -a $(BENCH_DIR)/handlers.txt

.PHONY: bench-admission
# BENCH_ADMISSION_FLAGS tunes the run, e.g. "--pace-edits 10 --sat-edits 40 --rounds 2"
# for a quick look, or "--configs none,noop,noop-record,guard --edits md-template,kcp-template
# --regimes pace --pace-edits 250 --rounds 4 --pace-rate 10" for p99s from 1,000 edits
# (see go run ./cmd/bench-admission --help in test/).
BENCH_ADMISSION_FLAGS ?=
bench-admission: tools build ## End-to-end admission overhead: no admission, VAP, the no-op webhooks (and the floor that records, noop-record), the guard (bench/admission.txt).
	@mkdir -p $(BENCH_DIR)
	cd test && go build -o $(BENCH_DIR)/noop-webhook ./cmd/noop-webhook
	cd test && go run ./cmd/bench-admission --bin-dir $(BIN) --noop-webhook $(BENCH_DIR)/noop-webhook \
	  --out $(BENCH_DIR)/admission.txt --summary $(BENCH_SUMMARY) $(BENCH_ADMISSION_FLAGS)

.PHONY: bench-scale
# BENCH_SCALE_FLAGS tunes the run, e.g. "--bare" for the objects of the runs
# before realistic ones (see go run ./cmd/bench-scale --help in test/).
BENCH_SCALE_FLAGS ?=
bench-scale: tools build ## The guard against 2,000 realistic clusters: memory, boot reconciliation and latency, next to 100 clusters (bench/scale.txt; takes minutes).
	@mkdir -p $(BENCH_DIR)
	cd test && go run ./cmd/bench-scale --clusters 2000 --small 100 --burst 500 --variants default,GOGC=100,GOMEMLIMIT=96MiB --profile-dir $(BENCH_DIR)/profiles \
	  --out $(BENCH_DIR)/scale.txt --summary $(BENCH_SUMMARY) $(BENCH_SCALE_FLAGS)

.PHONY: bench-cli
# BENCH_CLI_FLAGS tunes the run, e.g. "--status-args=--grace=0s" or "--skip-status"
# (see go run ./cmd/bench-cli --help in test/).
BENCH_CLI_FLAGS ?=
bench-cli: tools build ## The CLI: API requests of history, delay of status (bench/cli.txt).
	@mkdir -p $(BENCH_DIR)
	cd test && go run ./cmd/bench-cli --bin-dir $(BIN) --out $(BENCH_DIR)/cli.txt --summary $(BENCH_SUMMARY) $(BENCH_CLI_FLAGS)

.PHONY: bench-rollout
# BENCH_ROLLOUT_FLAGS tunes the run, e.g. "--rounds 5" (see go run ./cmd/bench-rollout --help in test/).
BENCH_ROLLOUT_FLAGS ?=
bench-rollout: tools build ## The user's view: a whole demo cluster rolled out in the sandbox with and without the guard (bench/rollout.txt).
	@mkdir -p $(BENCH_DIR)
	cd test && go run ./cmd/bench-rollout --bin-dir $(BIN) --out $(BENCH_DIR)/rollout.txt --summary $(BENCH_SUMMARY) $(BENCH_ROLLOUT_FLAGS)

# make soak runs the guard for $(SOAK) under a mixed load (edits, rollout
# restarts, kube-apiserver restarts, certificate rotations) and fails on a
# growth trend of its memory, goroutines or descriptors, a failed policed edit
# or incomplete history (test/reliability.md, Soak). Not part of make test.
SOAK ?= 30m
SOAK_FLAGS ?=

.PHONY: soak
soak: tools build ## Soak the guard for $(SOAK) (SOAK=5m for a short run; bench/soak-summary.txt, soak-samples.csv, soak.png).
	@mkdir -p $(BENCH_DIR)
	cd test && go run ./cmd/soak --duration $(SOAK) --bin-dir $(BIN) --out-dir $(BENCH_DIR) $(SOAK_FLAGS)

.PHONY: run
# hack/tools/makerun builds what the sandbox runs — bin/webhook and
# bin/rollout, etcd, kubectl and kube-apiserver unless bin/ holds them at
# the pinned versions, the sandbox (bin/sandbox), and bin/capi-core and
# bin/capi-kcp when SANDBOX_FLAGS asks for them — a numbered step each, a
# progress bar per build on a terminal, and then runs the sandbox in the
# foreground. exec: make's child is makerun itself, which hands Ctrl-C to
# the sandbox alone; the sandbox stops everything and exits 0, and so does
# make (no "Error" line).
MAKERUN_FLAGS ?=
run: makerun ## Start the sandbox: a management cluster with demo clusters, the CAPI controllers and the guard (SANDBOX_FLAGS="--clusters 2"); Ctrl-C stops it.
	@exec $(MAKERUN) --root $(ROOT) --bin-dir $(BIN) --version $(VERSION) $(MAKERUN_FLAGS) -- --dir $(ROOT)/.sandbox $(SANDBOX_FLAGS)

.PHONY: clean
clean: ## Remove build outputs (keeps bin/ tools; use clean-tools for those).
	rm -f $(BIN)/webhook $(BIN)/webhook-race $(BIN)/rollout $(BIN)/sandbox $(BIN)/makerun
	rm -rf $(CROSS_DIR) $(BIN)/cross-test $(IMAGE_DIR) $(DIST)
	rm -rf bench
	rm -rf .sandbox

.PHONY: clean-tools
clean-tools:
	rm -rf $(BIN)

# The guard's image and the release, without a container engine: hack/tools/image
# and hack/tools/release (go-containerregistry, kustomize's Go API and krew are
# dependencies of the hack/tools module, not of the product). Both cross-compile
# static binaries (CGO_ENABLED=0, -trimpath, VERSION stamped as with build) into
# bin/cross/<os>_<arch>/ and stamp every timestamp with SOURCE_DATE_EPOCH (by
# default the last commit's time), so the same commit and VERSION give the same
# image digest and the same files. IMG is the registry and repository to push
# to: given, make release points install.yaml at the image's digest there.
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null)
CROSS_DIR := $(BIN)/cross
IMAGE_DIR := $(BIN)/image
DIST := $(ROOT)/dist
# IMG as given on the command line or in the environment; empty when it is
# only this Makefile's default.
GIVEN_IMG = $(if $(filter command environment override,$(firstword $(origin IMG))),$(IMG))

.PHONY: image
image: ## The guard's image for linux/amd64 and linux/arm64, no container engine needed: bin/image/oci (OCI layout) and a tarball per platform for ctr images import.
	cd hack/tools && go run ./image build --root $(ROOT) --version $(VERSION) --img '$(GIVEN_IMG)' \
	  --revision '$(REVISION)' --source-date-epoch $(SOURCE_DATE_EPOCH) --bin-dir $(CROSS_DIR) --out $(IMAGE_DIR)

.PHONY: push
push: ## Push the image last built by make image or make release (bin/image/oci) to IMG=registry/repository:tag.
	@if [[ -z '$(GIVEN_IMG)' ]]; then \
	  echo 'make push: IMG is not set: name the registry, repository and tag to push to, e.g. make push IMG=registry.example.com/rollout-guard/webhook:v0.1.0' >&2; exit 1; fi
	cd hack/tools && go run ./image push --layout $(IMAGE_DIR)/oci --img '$(IMG)'

.PHONY: release
release: ## dist/: install.yaml, the image's tarballs, rollout for linux and darwin (amd64, arm64), its krew manifest, SHA256SUMS (VERSION=v0.1.0 [IMG=registry/repository]).
	cd hack/tools && go run ./release --root $(ROOT) --version $(VERSION) --img '$(GIVEN_IMG)' \
	  --revision '$(REVISION)' --source-date-epoch $(SOURCE_DATE_EPOCH) --bin-dir $(CROSS_DIR) --image-dir $(IMAGE_DIR) --out $(DIST)

# Container image and install manifests. docker-build needs a container
# engine (Docker with BuildKit, or Podman: DOCKER=podman), which not every
# machine that builds this project has; manifests needs only bin/kubectl.
IMG ?= rollout-guard/webhook:dev
DOCKER ?= docker

.PHONY: docker-build
docker-build: ## Build the guard's container image $(IMG) (VERSION is baked in as with build).
	$(DOCKER) build --build-arg VERSION=$(VERSION) -t $(IMG) .

.PHONY: manifests
manifests: tools ## Render config/default with image $(IMG) into bin/install.yaml.
	rm -rf $(BIN)/manifests && mkdir -p $(BIN)/manifests
	@img='$(IMG)'; name="$$img"; tag=latest; \
	  case "$${img##*/}" in *:*) name="$${img%:*}"; tag="$${img##*:}";; esac; \
	  printf '%s\n' \
	    'apiVersion: kustomize.config.k8s.io/v1beta1' \
	    'kind: Kustomization' \
	    'resources: [../../config/default]' \
	    'images:' \
	    '  - name: rollout-guard/webhook' \
	    "    newName: $$name" \
	    "    newTag: \"$$tag\"" > $(BIN)/manifests/kustomization.yaml
	$(BIN)/kubectl kustomize $(BIN)/manifests > $(BIN)/install.yaml
	rm -r $(BIN)/manifests
	@echo "wrote $(BIN)/install.yaml (image $(IMG))"
