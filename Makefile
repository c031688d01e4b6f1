# sandcheck: build, test and run. `make help` lists the targets.
#
# The end-to-end targets (run, test, bench) need root on Debian 12: they run
# scripts/setup.sh first, which installs and starts what is missing.

SHELL := bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help
# One shell per recipe, so multi-line recipes keep their variables and traps.
.ONESHELL:
# Targets share one Docker engine and one harness network: never in parallel.
.NOTPARALLEL:

GO  ?= go
# Every Go command of the Makefile builds the way a release does (static,
# -trimpath: scripts/release.sh), so build, vet, test, the probe, the tool
# image and `make release` share one build cache instead of compiling the
# whole dependency graph twice on a cold machine, and the tests run the
# configuration that ships.
export CGO_ENABLED ?= 0
export GOFLAGS ?= -trimpath
BIN ?= bin
OUT ?= out
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)

# e2e packages share the harness network lock and the Docker engine, so their
# test binaries run one at a time (scripts/go-test.sh: a lock file; the
# cluster tests: -p 1); `make test` runs go vet beside them (its compiles
# of the packages' test variants are theirs too, shared through the cache).
GO_TEST_FLAGS ?= -count=1 -timeout 60m
# SANDCHECK_BIN is where the e2e specs find the probe binary.
E2E_ENV = SANDCHECK_BIN=$(abspath $(BIN))
# The pure test packages: they touch nothing on the host that the host-state
# tests and the runners' conformance suites compare (no Docker, mounts,
# namespaces, cgroups, /run, iptables, BPF; only loopback, their own
# temporary folders and child processes such as chromium), so `make test`
# runs them beside the host packages (which run one at a time: they share
# the harness lock, the Docker engine and the host-wide leftover checks),
# in parallel and at a lower priority, where their compiles and CPU fill
# what the host packages leave idle while they wait on sandboxes.
PURE_PKGS = ./canary ./internal/bounded ./internal/depcheck ./internal/docscheck ./internal/labelfilter \
	./internal/testreport ./internal/yamlbound ./output ./policies/... ./probes ./probebin ./reports \
	./runners ./runners/all ./targets
GO_TEST_FLAGS_PURE ?= -count=1 -timeout 30m
# The sizes `make test` runs its longest tests at; `make test-full` runs
# them at full size: the release and the embedded probe for both
# architectures (arm64 is a whole cross-compile), the gateway references
# over the whole catalog (SANDCHECK_TEST_SIZE, e2e/e2e_test.go smallSize).
TEST_SIZE_ENV = SANDCHECK_RELEASE_ARCHES=amd64 SANDCHECK_TEST_SIZE=small

.PHONY: help setup setup-run build probe-embed release release-test test-full images run test go-test unit fuzz bench bench-tracer soak matrix lint fmt-check vet lint-quick script-test docs docs-check generate generate-check clean
.PHONY: cluster-build cluster cluster-down test-cluster test-cluster-stage bench-cluster

help: ## list the targets
	@awk -F':.*## ' '/^[a-z-]+:.*## / { printf "  %-12s %s\n", $$1, $$2 }' $(MAKEFILE_LIST)

setup: ## install and start what the e2e targets need (Debian 12, root)
	@bash scripts/setup.sh

setup-run: ## install and start only what a run needs (no compiler, no browser)
	@bash scripts/setup.sh --run

build: ## build bin/sandcheck-probe (static) and bin/sandcheck
	mkdir -p $(BIN)
	bash scripts/build-probe.sh $(BIN)/sandcheck-probe
	bash scripts/check-static.sh $(BIN)/sandcheck-probe || { echo "build: the probe must be static (CGO_ENABLED=0)" >&2; exit 1; }
	$(GO) build -ldflags "-X main.version=$(VERSION)" -o $(BIN)/sandcheck ./cmd/sandcheck

# The CLI embeds the probe (probebin/), so a binary installed with `go
# install` runs targets with nothing beside it; probebin's drift test fails
# when the probe's sources change without this.
probe-embed: ## rebuild the probes embedded in the CLI (probebin/sandcheck-probe.linux-{amd64,arm64}.gz); run after changing the probe's code
	tmp=$$(mktemp -d)
	trap 'rm -rf "$$tmp"' EXIT
	for arch in amd64 arm64; do
		bash scripts/build-probe.sh "$$tmp/sandcheck-probe.$$arch" $$arch
		gzip -n -9 <"$$tmp/sandcheck-probe.$$arch" >probebin/sandcheck-probe.linux-$$arch.gz
		echo "probe-embed: probebin/sandcheck-probe.linux-$$arch.gz ($$(stat -c %s probebin/sandcheck-probe.linux-$$arch.gz) bytes)"
	done

test-full: release-test ## the tests make test runs at a smaller size, at full size: release-test, and the gateway, OpenSandbox and command references over the whole catalog
	$(E2E_ENV) SANDCHECK_TEST_SIZE=full $(GO) test -count=1 -timeout 60m -v -run '^(TestGatewayHardenedAndWeak|TestOpenSandboxControls|TestCommandRunnerHardened|TestCommandRunnerWeak)$$' ./e2e/

release-test: setup build images ## the release tests at full size: `make release` for amd64 and arm64, every artifact verified, and both embedded probes rebuilt and compared (make test does amd64 only)
	SANDCHECK_RELEASE_ARCHES="amd64 arm64" $(GO) test -count=1 -timeout 40m -v -run '^TestMakeReleaseVerifies$$' ./internal/releasetest/
	SANDCHECK_RELEASE_ARCHES="amd64 arm64" $(GO) test -count=1 -timeout 20m -v -run '^TestEmbeddedProbeIsCurrent$$' ./probebin/

release: ## versioned, stripped, signed artifacts for linux/amd64 and arm64 in dist/VERSION: CLI, probe, tool image, SBOMs, SHA256SUMS, signed bundle (KEY=cosign.key, COSIGN_PASSWORD; scripts/release.sh)
	bash scripts/release.sh $(DIST)

images: ## build the first-party images (no-op when up to date)
	@bash scripts/build-images.sh

run: setup-run build images ## run the hardened reference target, reports in out/
	$(BIN)/sandcheck run --target fixtures/targets/hardened.yaml --out-dir $(OUT)/ || {
		rc=$$?
		echo "make run: sandcheck run exited $$rc (1: a release criterion failed, 2: the harness could not run; reports in $(OUT)/)" >&2
		exit $$rc
	}

# Each stage prints its duration as it ends and all of them again at the end,
# so a slow CI run says where its time went.
test: ## everything CI runs: setup, build, lint, script tests, all Go tests incl. e2e, a short fuzz of every parser, then the cluster stage; prints each stage's duration
	took=()
	stage() {
		local name=$$1 t=$$SECONDS
		shift
		echo "=== make test: $$name"
		"$$@"
		took+=("$$(printf '%-20s %5d s' "$$name" "$$((SECONDS - t))")")
		echo "=== make test: $$name took $$((SECONDS - t)) s"
	}
	# The cluster's binaries (about 13 min of two cores when nothing is
	# cached) build in the background from the start, at the lowest CPU
	# priority: on the cores setup leaves idle while it installs packages,
	# then on the cycles the suites below leave idle while they wait on
	# sandboxes; the cluster stage waits for that build, and builds in the
	# foreground what it did not finish. Its own session, so a failing
	# stage ends it, whose autogroup is at nice 19 too (scripts/lowprio.sh:
	# a session is a scheduling group of its own, and nice alone does not
	# hold one back against another).
	cluster_log=$$(mktemp /tmp/sandcheck-cluster-build.XXXXXX)
	setsid bash scripts/lowprio.sh 19 bash scripts/cluster/build.sh $(BIN)/cluster >"$$cluster_log" 2>&1 </dev/null &
	cluster_pid=$$!
	# The module's own downloads (about 2.6 GB from the module proxy on an
	# empty cache) start beside setup's apt too; the build stage's go
	# commands wait on the module cache's locks for what is still coming.
	setsid bash scripts/lowprio.sh 5 $(GO) mod download >/dev/null 2>&1 </dev/null &
	download_pid=$$!
	fuzz_pid=""
	fuzz_log=$$(mktemp /tmp/sandcheck-fuzz.XXXXXX)
	trap 'for p in $$cluster_pid $$download_pid $$fuzz_pid; do kill -- -$$p 2>/dev/null || true; done; rm -f "$$cluster_log" "$$fuzz_log"' EXIT
	stage setup $(MAKE) --no-print-directory setup
	stage build $(MAKE) --no-print-directory build images
	# docs-check reads the catalog from the CLI the build stage just made
	# rather than linking another one with go run.
	# The lint stage's quick checks (gofmt, the Rego, the generated docs,
	# the BPF objects: generate-check rewrites tracer/ while it runs, so
	# nothing compiles beside it) stay here; go vet (minutes of CPU: it
	# compiles every package's test variant and analyses it) runs in the
	# background beside the Go tests at nice 10, like the fuzz stage, on
	# the cycles the host packages leave idle while they wait on
	# sandboxes; vet-wait prints its output and fails if it failed.
	stage lint $(MAKE) --no-print-directory lint-quick DOCS_CLI=$(BIN)/sandcheck
	vet_log=$$(mktemp /tmp/sandcheck-vet.XXXXXX)
	setsid bash scripts/lowprio.sh 10 $(MAKE) --no-print-directory vet >"$$vet_log" 2>&1 </dev/null &
	vet_pid=$$!
	trap 'for p in $$cluster_pid $$download_pid $$fuzz_pid $$vet_pid; do kill -- -$$p 2>/dev/null || true; done; rm -f "$$cluster_log" "$$fuzz_log" "$$vet_log"' EXIT
	stage script-test $(MAKE) --no-print-directory script-test
	# The fuzz stage (each parser's target for FUZZTIME, after compiling
	# its package's whole dependency graph again with coverage counters:
	# minutes of CPU) runs in the background beside the Go tests, at nice
	# 10 like their pure packages: its compiles fill what the host packages
	# leave idle while they wait on sandboxes, and each target fuzzes for
	# its FUZZTIME however loaded the machine is. fuzz-wait prints its log
	# and fails if it failed.
	setsid bash scripts/lowprio.sh 10 $(MAKE) --no-print-directory fuzz >"$$fuzz_log" 2>&1 </dev/null &
	fuzz_pid=$$!
	stage go-test $(MAKE) --no-print-directory go-test
	# wait_bg PID LOG WHAT: a background stage's end; its log, and a
	# failure if it failed.
	wait_bg() {
		local rc=0
		wait "$$1" || rc=$$?
		sed 's/^/  /' "$$2"
		((rc == 0)) || { echo "=== make test: $$3 failed (exit $$rc, its log above)"; return 1; }
	}
	stage fuzz-wait wait_bg "$$fuzz_pid" "$$fuzz_log" "the fuzz stage"
	stage vet-wait wait_bg "$$vet_pid" "$$vet_log" "go vet"
	wait_build() {
		wait "$$cluster_pid" || echo "=== make test: the background cluster build failed (its log below); the cluster stage builds again"
		sed 's/^/  /' "$$cluster_log"
	}
	stage cluster-build-wait wait_build
	stage cluster $(MAKE) --no-print-directory test-cluster-stage
	echo "=== make test: stage durations"
	printf '  %s\n' "$${took[@]}"
	$(BIN)/testreport -summary $(OUT)/go-test-host.json $(OUT)/go-test-pure.json | sed -n '/slowest test packages/,/^$$/p;/slowest tests/,/^$$/p'

# The cluster stage of `make test`, after the Docker suite: the cluster's
# binaries built (or reused from bin/cluster), then `make test-cluster`.
# Where the binaries cannot be built (no module proxy, no cache) it says so
# and stops there; under CI (CI=true) that fails the run instead.
# Two go test runs side by side (scripts/go-test.sh): the host packages one
# at a time, the pure ones (PURE_PKGS) beside them at a lower priority; each
# read by internal/testreport as it runs, the ten slowest packages and tests
# of both at the end, the streams kept in $(OUT)/go-test-{host,pure}.json.
go-test: ## the Go tests of make test (all packages, e2e included; needs setup, build and images)
	GO="$(GO)" BIN="$(BIN)" OUT="$(OUT)" PURE_PKGS="$(PURE_PKGS)" GO_TEST_FLAGS="$(GO_TEST_FLAGS)" \
		GO_TEST_FLAGS_PURE="$(GO_TEST_FLAGS_PURE)" $(E2E_ENV) $(TEST_SIZE_ENV) bash scripts/go-test.sh

test-cluster-stage: ## the cluster stage of make test: cluster-build, then test-cluster (skipped with a notice when the cluster cannot be built here; never under CI=true)
	@echo "=== cluster stage: build (cached in $(BIN)/cluster)"
	t=$$SECONDS
	if ! $(MAKE) --no-print-directory cluster-build; then
		if [[ $${CI:-} == true ]]; then
			echo "test: the cluster's binaries could not be built (above); CI requires the cluster tests" >&2
			exit 1
		fi
		echo "test: cluster tests NOT run: the cluster's binaries cannot be built on this machine (above); 'make test-cluster' runs them where they can" >&2
		exit 0
	fi
	echo "cluster build: $$((SECONDS - t)) s"
	echo "=== cluster stage: tests"
	t=$$SECONDS
	$(MAKE) --no-print-directory test-cluster
	echo "cluster tests: $$((SECONDS - t)) s"

unit: ## fast tests only (go test -short), no setup
	$(GO) test -short -count=1 ./...

# Each fuzz target runs for FUZZTIME; crashers found are kept under the
# package's testdata/fuzz and replayed by every plain `go test` from then on.
FUZZTIME ?= 5s
FUZZ_TARGETS = probes:FuzzParseResults targets:FuzzParse internal/yamlbound:FuzzCheck policies:FuzzParseWaivers \
	canary:FuzzDNSAnswer canary:FuzzParseEcho canary:FuzzProxyRequest canary:FuzzMetadataRequest canary:FuzzSinkHello \
	output:FuzzReadTar output:FuzzReadTarStaysInside output:FuzzUnframe

# Go's fuzzing coordinator can itself fail a target with a bare "context
# deadline exceeded" when FUZZTIME runs out while a loaded machine's worker
# is still answering (CI saw it on FuzzSinkHello and FuzzParseResults, no
# input failing). Such a run, and only one that wrote no failing input, is
# made again, up to four tries in all (make test fuzzes beside the Go
# tests); a fourth one fails.
fuzz: ## run every fuzz target for FUZZTIME each (parsers of probe output, targets, waivers, canaries, copy-out)
	@for t in $(FUZZ_TARGETS); do
		for try in 1 2 3 4; do
			echo "fuzz: $${t#*:} in ./$${t%%:*} for $(FUZZTIME)"
			if $(GO) test -run "^$${t#*:}$$" -fuzz "^$${t#*:}$$" -fuzztime $(FUZZTIME) ./$${t%%:*} 2>&1 | tee /tmp/sandcheck-fuzz.$$$$.log; then
				break
			fi
			if ((try < 4)) && grep -q 'context deadline exceeded' /tmp/sandcheck-fuzz.$$$$.log && ! grep -q 'Failing input written' /tmp/sandcheck-fuzz.$$$$.log; then
				echo "fuzz: $${t#*:}: the fuzzing coordinator's own deadline, no failing input: again"
				continue
			fi
			rm -f /tmp/sandcheck-fuzz.$$$$.log
			exit 1
		done
	done
	rm -f /tmp/sandcheck-fuzz.$$$$.log

bench: setup build images ## hardened references through the CLI (wall, start, per-probe seconds), then grading time per stored run
	$(E2E_ENV) $(GO) test -run '^$$' -bench . -benchtime 1x ./e2e/
	$(GO) test -run '^$$' -bench Grade ./policies/
	$(GO) test -count=1 -run '^$$' -bench SBOMRunner -benchtime 3x -v ./provenance/ | grep -E 'SBOM|^ok|FAIL'

matrix: setup build images ## every reference (process, bwrap, runc, runsc, the wrappers) over the whole catalog; the compare matrix in $(OUT)/matrix and docs/matrix.md, refused (exit 2) for an inconclusive cell fixtures/references does not explain
	bash scripts/matrix.sh --readme $(BIN) $(OUT)/matrix

# generate-check needs clang; without it the committed BPF objects are used
# as they are (CI installs clang, so CI checks them).
HAVE_CLANG := $(shell command -v clang >/dev/null 2>&1 && echo yes)
lint: lint-quick vet ## gofmt, go vet, Rego lint, generated-docs drift and (with clang) BPF drift

lint-quick: fmt-check rego-check docs-check $(if $(HAVE_CLANG),generate-check) ## lint without go vet (make test runs vet beside the Go tests)

fmt-check: ## fail listing the Go files gofmt would change
	@files=$$(find . -name '*.go' -not -path './.git/*' -not -path './vendor/*' -not -path '*/testdata/*' -print0 | xargs -0 -r gofmt -l)
	if [[ -n $$files ]]; then
		echo "gofmt would change these files (run gofmt -w):" >&2
		echo "$$files" >&2
		exit 1
	fi

vet: ## go vet ./...
	$(GO) vet ./...

rego-check: ## the Rego as `opa check --strict` and `opa fmt` want it (policies/rego)
	$(GO) test -count=1 -run '^TestRego(Strict|Formatted)$$' ./policies/

script-test: ## test scripts/setup.sh (daemon.json merge, manual branch)
	@bash scripts/test-setup.sh

docs: ## regenerate docs/probes.md (probe catalog) and docs/targets.md (target file reference)
	@mkdir -p docs
	tmp=$$(mktemp)
	trap 'rm -f "$$tmp"' EXIT
	$(GO) run ./cmd/sandcheck probes docs >"$$tmp"
	cp "$$tmp" docs/probes.md
	$(GO) run ./internal/targetdocs targets >"$$tmp"
	cp "$$tmp" docs/targets.md
	chmod 644 docs/probes.md docs/targets.md

# DOCS_CLI: a CLI built from this checkout to read the catalog from (make
# test passes the one its build stage made); by default go run builds one.
docs-check: ## fail when docs/probes.md or docs/targets.md is not what `make docs` would write
	@tmp=$$(mktemp)
	trap 'rm -f "$$tmp"' EXIT
	for doc in probes targets; do
		if [[ $$doc == probes ]]; then $(or $(DOCS_CLI),$(GO) run ./cmd/sandcheck) probes docs >"$$tmp"; else $(GO) run ./internal/targetdocs targets >"$$tmp"; fi
		if ! diff -u docs/$$doc.md "$$tmp"; then
			echo "docs/$$doc.md is stale: run 'make docs' and commit the result" >&2
			exit 1
		fi
	done

generate: ## go generate ./... (bpf2go needs clang and libbpf-dev: make setup)
	$(GO) generate ./...

generate-check: ## fail when the committed bpf2go output is not what `make generate` writes
	@tmp=$$(mktemp -d)
	trap 'rm -rf "$$tmp"' EXIT
	cp tracer/tracer_x86_bpfel.go tracer/tracer_x86_bpfel.o "$$tmp"/
	$(GO) generate ./tracer/
	if ! cmp -s "$$tmp"/tracer_x86_bpfel.o tracer/tracer_x86_bpfel.o || ! diff -u "$$tmp"/tracer_x86_bpfel.go tracer/tracer_x86_bpfel.go; then
		cp "$$tmp"/tracer_x86_bpfel.go "$$tmp"/tracer_x86_bpfel.o tracer/
		echo "tracer/: the committed BPF objects are stale (left as they were): run 'make generate' and commit the result" >&2
		exit 1
	fi

soak: setup build images ## the references back to back (runc x20, gVisor x10, bwrap x10, the weak ones x5; SANDCHECK_SOAK_SCALE=percent scales them): fails on any verdict change or any probe graded differently between runs; then the liar corpus x10, none may exit 0
	$(E2E_ENV) $(GO) test -count=1 -tags soak -run '^TestSoak$$' -timeout 6h -v ./e2e/ | grep -E '^(=== RUN|--- |ok|FAIL|PASS)|soak_test.go'
	$(E2E_ENV) $(GO) test -count=10 -run '^TestLiarCorpus$$' -timeout 6h -v ./e2e/ | grep -E '^(--- |ok|FAIL|PASS)|liars_test.go'

bench-tracer: setup build images ## the eBPF tracer's CPU overhead against an empty program's on syscall-heavy workloads: PASS/FAIL per workload (1.5x), losses; the procedure's calibration (two identical programs)
	$(E2E_ENV) $(GO) test -count=1 -run '^$$' -bench 'BenchmarkTracerOverhead|BenchmarkHostSurface' -benchtime 1x -v ./tracer/

# The single-node Kubernetes cluster (scripts/cluster/): Kubernetes and etcd
# built from their Go modules into $(BIN)/cluster (cached), Debian's
# containerd, runc and CNI plugins; every address loopback or a bridge the
# scripts create.
cluster-build: ## build (or reuse) the cluster's binaries in bin/cluster: Kubernetes v1.37.2, etcd v3.7.0, pause
	bash scripts/cluster/build.sh $(BIN)/cluster

cluster: cluster-build ## start the single-node cluster (root); prints the admin kubeconfig
	CLUSTER_BIN=$(abspath $(BIN))/cluster bash scripts/cluster/up.sh

cluster-down: ## stop the cluster and put the host back as it was
	CLUSTER_BIN=$(abspath $(BIN))/cluster bash scripts/cluster/down.sh

test-cluster: setup build images cluster-build ## cluster tests: up, the kubernetes runner's conformance suite and e2e tests, down, host unchanged
	CLUSTER_BIN=$(abspath $(BIN))/cluster bash scripts/cluster/test.sh -- \
		env $(E2E_ENV) $(GO) test $(GO_TEST_FLAGS) -p 1 -tags cluster -run '^TestKubernetes' ./runners/kubernetes/ ./e2e/

bench-cluster: setup build images cluster-build ## the full catalog through the cluster, wall time per pool (runc, gVisor; floor 60 s each)
	CLUSTER_BIN=$(abspath $(BIN))/cluster bash scripts/cluster/test.sh -- \
		env $(E2E_ENV) $(GO) test -count=1 -tags cluster -run '^$$' -bench KubernetesCatalogPerPool -benchtime 1x ./e2e/

clean: ## remove bin/ and out/
	rm -rf $(BIN) $(OUT)
