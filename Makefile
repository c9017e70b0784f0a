# gatehouse — build, run, test, benchmark.
#
#   make run    build and start the gateway in embedded mode with the demo config
#   make test   download modules, vet, lint, and run every test with the race detector
#   make test-real  end-to-end tests against real llama-server inference (builds it once; not in CI)
#   make bench  load benchmark: gatehouse vs bare proxy vs plain reverse proxy vs direct
#   make bench-balance  balancing benchmark: round-robin vs least-requests vs least-tokens
#   make prices  regenerate the embedded price catalog from LiteLLM's dataset (pinned; needs PyPI)

GO          ?= go
BIN         := bin
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
GOTESTFLAGS ?=

.PHONY: run build test test-real vet lint unit bench bench-balance fuzz prices clean

build:
	$(GO) build -o $(BIN)/gatehouse ./cmd/gatehouse
	$(GO) build -o $(BIN)/mockllm ./cmd/mockllm

run: build
	$(BIN)/gatehouse serve --config examples/demo.yaml

test: deps vet lint unit

deps:
	$(GO) mod download
	cd bench && $(GO) mod download

vet:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
	cd bench && $(GO) vet ./...

lint:
	$(GO) run $(STATICCHECK) ./...
	cd bench && $(GO) run $(STATICCHECK) ./...

# unit runs against real PostgreSQL and Redis servers (scripts/test-services),
# started first and stopped on the way out, whether the tests pass or not.
unit:
	@set -e; eval "$$($(CURDIR)/scripts/test-services start)"; \
	trap '$(CURDIR)/scripts/test-services stop' EXIT; \
	$(GO) test -race -count=1 $(GOTESTFLAGS) ./...; \
	cd bench && $(GO) test -count=1 ./...

# test-real runs the realinference suite (cmd/gatehouse/real*_test.go)
# against llama-server processes; scripts/llama-server builds the server
# and fetches the model the first time (~10 minutes), then is instant.
# (The assignment makes a failed build stop here: eval "$$(…)" would not.)
test-real: build
	@set -e; llama=$$($(CURDIR)/scripts/llama-server build); eval "$$llama"; $(GO) test -tags realinference -count=1 -run 'Real' -v ./cmd/gatehouse/

bench: build
	cd bench && $(GO) run ./cmd/benchrun -gatehouse ../$(BIN)/gatehouse -mockllm ../$(BIN)/mockllm $(BENCHFLAGS)

bench-balance: build
	cd bench && $(GO) run ./cmd/balance -gatehouse ../$(BIN)/gatehouse -mockllm ../$(BIN)/mockllm $(BALANCEFLAGS)

prices:
	scripts/prices

# fuzz runs each fuzz target for FUZZTIME (their seed corpora already run in make test).
FUZZTIME ?= 30s
fuzz:
	$(GO) test -run='^$$' -fuzz='^FuzzEachField$$' -fuzztime=$(FUZZTIME) ./internal/llm/
	$(GO) test -run='^$$' -fuzz='^FuzzSSE$$' -fuzztime=$(FUZZTIME) ./internal/llm/
	$(GO) test -run='^$$' -fuzz='^FuzzParseChatRequest$$' -fuzztime=$(FUZZTIME) ./internal/llm/
	$(GO) test -run='^$$' -fuzz='^FuzzAppendQuote$$' -fuzztime=$(FUZZTIME) ./internal/llm/
	$(GO) test -run='^$$' -fuzz='^FuzzParse$$' -fuzztime=$(FUZZTIME) ./internal/config/
	$(GO) test -run='^$$' -fuzz='^FuzzSetUsageCost$$' -fuzztime=$(FUZZTIME) ./internal/llm/

clean:
	rm -rf $(BIN)
