# nanoclawd. `make run` and `make test` do all set-up on a fresh machine.
GO      ?= go
BIN     := bin/nanoclawd
RUNNER  := agent-runner/dist/index.js
GOFILES := $(shell find cmd internal migrations -name '*.go' -o -name '*.sql' 2>/dev/null) go.mod go.sum template.go nanoclaw.config.template.jsonc

.PHONY: build run test bench chaos deps rundeps clean

build: $(BIN) $(RUNNER)

$(BIN): $(GOFILES)
	$(GO) build -o $(BIN) ./cmd/nanoclawd

agent-runner/node_modules/.package-lock.json: agent-runner/package-lock.json
	cd agent-runner && npm ci --no-audit --no-fund
	@touch $@

$(RUNNER): agent-runner/node_modules/.package-lock.json $(shell find agent-runner/src -type f 2>/dev/null) agent-runner/tsconfig.json
	cd agent-runner && npm run build

run: rundeps build nanoclaw.config.jsonc
	./$(BIN) run

# The owner's config: a copy of the template the first time, then theirs
# (git ignores it).
nanoclaw.config.jsonc:
	cp nanoclaw.config.template.jsonc $@

# The daemon confines non-main groups with bubblewrap on Linux: installed
# here as root, else the one line to run.
rundeps:
	@if [ "$$(uname)" = Linux ] && ! command -v bwrap >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "installing bubblewrap (the sandbox of non-main groups)"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap >/dev/null; \
	  else \
	    echo "nanoclawd needs bubblewrap to confine non-main groups: run 'sudo apt-get install bubblewrap', then 'make run' again"; exit 1; \
	  fi; \
	fi

# The tests also run the SDK's own Bash sandbox, which needs socat.
deps: rundeps
	@if [ "$$(uname)" = Linux ] && ! command -v socat >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "installing socat (the SDK's Bash sandbox, for the tests)"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq socat >/dev/null; \
	  else \
	    echo "the tests need socat: run 'sudo apt-get install socat', then 'make test' again"; exit 1; \
	  fi; \
	fi

test: deps build
	$(GO) vet ./...
	$(GO) test -count=1 -timeout 20m ./...

bench: deps build
	@mkdir -p bin
	$(GO) test -run '^$$' -bench . -benchtime 1x -timeout 10m ./internal/bench/ | tee bin/bench.txt
	@$(GO) run ./internal/bench/report < bin/bench.txt

# The fault suite, long: CHAOS_CYCLES=200 by default; CHAOS_MINUTES=30 for a soak.
chaos: deps build
	@mkdir -p bin && rm -f bin/chaos-report.txt
	CHAOS_CYCLES=$${CHAOS_CYCLES:-200} CHAOS_REPORT=$(CURDIR)/bin/chaos-report.txt \
	  $(GO) test -count=1 -run TestChaos -timeout 120m -v ./internal/chaos/ > bin/chaos.txt 2>&1; rc=$$?; \
	  grep -E '^(=== RUN|--- |ok|FAIL)|    [a-z]+_test.go:[0-9]+:' bin/chaos.txt | grep -v '^        {' ; cat bin/chaos-report.txt 2>/dev/null; exit $$rc

clean:
	rm -rf bin agent-runner/dist
