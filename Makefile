# gatehouse — build, run, test, benchmark.
#
#   make run    build and start the gateway in embedded mode with the demo config
#   make test   check prerequisites, download modules, vet, lint, and run every test with the race detector
#   make test-docker  the same inside a container (needs a container engine)
#   make image  build the container image (Dockerfile), stamped with the version and commit
#   make release  archives for linux and darwin on amd64 and arm64, with checksums and SBOMs, in dist/
#   make test-real  end-to-end tests against real llama-server inference (builds it once; not in CI)
#   make ui     rebuild the dashboard (web/dist, committed) from web/src with npm ci
#   make bench  the standing load benchmark (issue 16): gatehouse vs a plain reverse proxy, pinned and unpinned
#   make bench-streams  1,000 and 10,000 concurrent streams: memory per stream and time to first event vs a plain proxy
#   make bench-balance  balancing benchmark: round-robin vs least-requests vs least-tokens
#   make prices  regenerate the embedded price catalog from LiteLLM's dataset (pinned; needs PyPI)

GO          ?= go
BIN         := bin
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
GOTESTFLAGS ?=

# What gatehouse --version reports (scripts/build computes the same for the
# image and the release archives): the nearest tag, else dev; HEAD, with
# -dirty when the tree has changes.
VERSION ?= $(shell git describe --tags --dirty 2>/dev/null || echo dev)
COMMIT  ?= $(shell c=$$(git rev-parse HEAD 2>/dev/null) && { git diff --quiet HEAD 2>/dev/null || c=$$c-dirty; }; echo $${c:-unknown})

.PHONY: run build image release test test-docker prereqs deps test-real vet lint unit ui ui-deps ui-check bench bench-streams bench-balance soak fuzz prices clean

build:
	$(GO) build -ldflags '-X main.version=$(VERSION) -X main.commit=$(COMMIT)' -o $(BIN)/gatehouse ./cmd/gatehouse
	$(GO) build -o $(BIN)/mockllm ./cmd/mockllm

run: build
	$(BIN)/gatehouse serve --config examples/demo.yaml

# release builds, in dist/, an archive and an SBOM per platform (linux and
# darwin on amd64 and arm64) and SHA256SUMS; see scripts/release.
release:
	VERSION=$(VERSION) COMMIT=$(COMMIT) scripts/release dist

# image builds the container image from the Dockerfile (distroless, non-root,
# static binary), tagged with the version; DOCKER=podman works too.
image:
	$(DOCKER) build --build-arg VERSION=$(VERSION) --build-arg COMMIT=$(COMMIT) -t gatehouse:$(VERSION) -t gatehouse:latest .

test: prereqs deps ui-check vet lint unit

# The dashboard: web/src (Svelte, TypeScript, uPlot) built by Vite into
# web/dist, which is committed and embedded in the binary, so building
# gatehouse needs no Node.js. make ui rebuilds it; make test fails when the
# committed build is not what the sources build (ui-check), and its browser
# test (cmd/gatehouse, TestDashboardInBrowser) drives the real thing with
# playwright-core from web/node_modules.
ui-deps:
	cd web && npm ci --no-audit --no-fund

ui: ui-deps
	cd web && npm run check && npm run build

ui-check: ui-deps
	@cd web && npm run --silent check && \
	out=$$(mktemp -d) && trap 'rm -rf "$$out"' EXIT && \
	npx vite build --logLevel error --outDir "$$out/dist" --emptyOutDir && \
	if ! diff -r "$$out/dist" dist >/dev/null; then \
		echo "make: web/dist is stale: it is not what web/src builds. Run make ui and commit web/dist." >&2; \
		diff -r "$$out/dist" dist | head -20 >&2; exit 1; \
	fi; echo "web/dist matches web/src"

# prereqs lists, before anything slow starts, everything make test needs and
# this machine lacks (Go of go.mod's version, a C compiler for -race, git,
# python3 with venv and pip, PostgreSQL and Redis when they cannot be
# installed), each with how to get it.
prereqs:
	@GO='$(GO)' $(CURDIR)/scripts/test-services check

# The Helm chart's test is a module of its own (deploy/kubernetes/charttest),
# so the gateway's module never depends on Kubernetes' libraries.
CHARTTEST := deploy/kubernetes/charttest

deps:
	$(GO) mod download
	cd bench && $(GO) mod download
	cd $(CHARTTEST) && $(GO) mod download

vet:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
	cd bench && $(GO) vet ./...
	cd $(CHARTTEST) && $(GO) vet ./...

lint:
	$(GO) run $(STATICCHECK) ./...
	cd bench && $(GO) run $(STATICCHECK) ./...
	cd $(CHARTTEST) && $(GO) run $(STATICCHECK) ./...

# NETHTTP_E2E are the end-to-end tests run a second time on net/http's
# HTTP/1.x server (server.http1_engine: net/http; the harness sets it from
# GATEHOUSE_TEST_HTTP1_ENGINE), the engine the gateway's own
# (internal/h1, the default) stands in for: plain and bad requests,
# streams and hang-ups, limits and their headers and trailers, the SDKs,
# TLS, HTTP/2, the listener's refusals and a graceful shutdown. 42-75 s
# under -race here, by the machine's load.
NETHTTP_E2E := TestBadInputGetsOpenAIErrors|TestClientDisconnectCancelsUpstream|TestTimeouts|TestStreamIsRelayedEventByEvent|TestSDKStreamOnEveryProvider|TestSDKChatCompletion|TestSDKEmbeddings|TestSDKModelsList|TestSDKErrors|TestLimitsCostHeaderAndStreamTrailer|TestLimitsAnthropicRefusalShape|TestLimitsHeadersOnRefusalsOnly|TestTLSListener|TestHTTP2CleartextAndTLS|TestH2COff|TestSmugglingIsRefusedAndTheConnectionClosed|TestOversizedHeadersAndBodies|TestSlowClientsAreCutOffWhileOthersAreServed|TestPipelinedRequestsAreAnsweredInOrder|TestUnknownRoutesAndMethodsAnswerInTheirDialect|TestProcessGracefulShutdownFinishesStreams

# unit runs against real PostgreSQL and Redis servers (scripts/test-services),
# started first and stopped on the way out, whether the tests pass or not. A
# failed start fails here, with the servers' own error: the script's output is
# captured before it is evaluated (eval "$$(…)" would ignore its status).
# cmd/gatehouse's tests take 7-8 minutes under -race on an idle 2-core
# machine, close to go test's default 10-minute limit for one package:
# -timeout 20m keeps a busy machine from turning that into a failure.
unit: prereqs
	@set -e; services=$$(GO='$(GO)' $(CURDIR)/scripts/test-services start) || \
		{ echo "make: the test services did not start: scripts/test-services said why above" >&2; exit 1; }; \
	eval "$$services"; \
	trap '$(CURDIR)/scripts/test-services stop' EXIT; \
	$(GO) test -race -count=1 -timeout 20m $(GOTESTFLAGS) ./...; \
	GATEHOUSE_TEST_HTTP1_ENGINE=net/http $(GO) test -race -count=1 $(GOTESTFLAGS) -run '^($(NETHTTP_E2E))$$' ./cmd/gatehouse/; \
	(cd bench && $(GO) test -count=1 ./...); \
	cd $(CHARTTEST) && $(GO) test -count=1 ./...

# test-docker runs make test inside a container (contrib/test/Dockerfile) on
# this checkout, for a machine that should not run the services itself; it
# needs a running container engine (DOCKER=podman works too). Go's module and
# build caches and the embedder's venv live in two named volumes, so only the
# first run downloads them.
DOCKER ?= docker
test-docker:
	@err=$$($(DOCKER) info 2>&1 >/dev/null) || { \
		echo "make test-docker: no container engine answers ('$(DOCKER) info' failed: $$(echo "$$err" | tail -1))." >&2; \
		echo "Start one (Docker or Podman: DOCKER=podman), or run make test here, which installs and starts the services itself." >&2; \
		exit 1; }
	$(DOCKER) build -t gatehouse-test -f contrib/test/Dockerfile contrib/test
	$(DOCKER) run --rm --shm-size=256m -v "$(CURDIR)":/src -w /src \
		-v gatehouse-test-gomod:/go/pkg/mod -v gatehouse-test-cache:/root/.cache \
		gatehouse-test make test

# test-real runs the realinference suite (cmd/gatehouse/real*_test.go)
# against llama-server processes; scripts/llama-server builds the server
# and fetches the model the first time (~10 minutes), then is instant.
# (The assignment makes a failed build stop here: eval "$$(…)" would not.)
test-real: build
	@set -e; llama=$$($(CURDIR)/scripts/llama-server build); eval "$$llama"; $(GO) test -tags realinference -count=1 -run 'Real' -v ./cmd/gatehouse/

# bench is the standing load benchmark (bench/README.md): the pinned and
# unpinned layouts, 32 and 256 clients, streaming and not, the exact cache's
# hits and misses, embedded and Redis mode (it starts its own redis-server
# and PostgreSQL; pinning needs taskset), targets in ABBA order, medians of
# 3 rounds; about 35 minutes. The report goes to bin/bench-report.md, a CPU
# profile per layout, scenario and target to bin/bench-profiles/.
# make bench BENCHFLAGS=-quick is the smoke test (about 3 minutes);
# make bench BENCHFLAGS='-rate 4000 -scenarios nonstream -targets plainproxy,full'
# compares latencies at one rate (an open loop) instead of at each
# target's best throughput.
# The 1,000 and 10,000 concurrent streams scenario (memory per stream) is
# a tool of its own, bench/cmd/streams, with its own target bench-streams:
# once that directory exists, make bench runs it after the load benchmark.
bench: build
	cd bench && $(GO) run ./cmd/benchrun -gatehouse ../$(BIN)/gatehouse -mockllm ../$(BIN)/mockllm \
		-out ../$(BIN)/bench-report.md -profiles ../$(BIN)/bench-profiles $(BENCHFLAGS)
ifneq ($(wildcard bench/cmd/streams),)
	$(MAKE) bench-streams
endif

# bench-streams opens 1,000 and then 10,000 concurrent streams at once
# against gatehouse (full stack) and the plain proxy, each restarted per
# run, and reports memory per stream, streams completed and time to first
# event (bench/README.md, "Concurrent streams"); report in
# bin/bench-streams.md. It raises RLIMIT_NOFILE itself (needs root or
# CAP_SYS_RESOURCE above the hard limit). STREAMSFLAGS=-quick: 1,000 only,
# one round.
bench-streams: build
	cd bench && $(GO) run ./cmd/streams -gatehouse ../$(BIN)/gatehouse -mockllm ../$(BIN)/mockllm \
		-out ../$(BIN)/bench-streams.md $(STREAMSFLAGS)

bench-balance: build
	cd bench && $(GO) run ./cmd/balance -gatehouse ../$(BIN)/gatehouse -mockllm ../$(BIN)/mockllm $(BALANCEFLAGS)

# soak runs gatehouse for SOAKFLAGS' duration (default 20 minutes) at a
# steady mixed load with a config reload every minute and fails when
# goroutines, open files or heap do not return to their baseline or a
# request lacks its one usage record. SOAKFLAGS=-quick: two minutes.
soak: build
	cd bench && $(GO) run ./cmd/soak -gatehouse ../$(BIN)/gatehouse -mockllm ../$(BIN)/mockllm \
		-out ../$(BIN)/soak-report.md $(SOAKFLAGS)

prices:
	scripts/prices

# fuzz runs every fuzz target of the module for FUZZTIME each (their seed
# corpora already run in make test). The list is derived from the code, every
# `func FuzzX(f *testing.F)` in a test file, so a new target is fuzzed at once.
FUZZTIME ?= 30s
fuzz:
	@set -e; grep -rHo --include='*_test.go' --exclude-dir=bench '^func Fuzz[A-Za-z0-9_]*(f \*testing\.F)' . | \
	sed -E 's|^(.*)/[^/]*:func (Fuzz[A-Za-z0-9_]*).*|\1 \2|' | sort -u | \
	while read -r dir target; do \
		echo "fuzz $$dir $$target"; \
		$(GO) test -run='^$$' -fuzz="^$$target\$$" -fuzztime=$(FUZZTIME) $$dir || exit 1; \
	done

clean:
	rm -rf $(BIN) dist
