# Nodeforge builder. `make help` lists the targets.
GO      ?= go
BIN     ?= bin/builder
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X main.version=$(VERSION)
FUZZTIME ?= 10m
DEMO    ?= out/demo
# The vendored libzstd (DataDog/zstd, cgo) compresses squashfs blocks; -O3
# as zstd's own build uses costs 10% less CPU than cgo's default -O2 (same
# bytes).
export CGO_CFLAGS ?= -O3 -g

.PHONY: help build test lint bench fuzz demo clean

help:
	@echo "build  - build $(BIN)"
	@echo "test   - vet and run every test with the race detector (CI runs this)"
	@echo "lint   - gofmt check and go vet"
	@echo "bench  - run the Go benchmarks (not part of CI)"
	@echo "fuzz   - run each fuzz target for FUZZTIME (default 10m)"
	@echo "demo   - write the demo package base to $(DEMO), lock and build its release"

build:
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/builder

test: lint
	$(GO) test -race -count=1 -timeout 30m ./...

lint:
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

# Every Fuzz* function, package by package, for FUZZTIME each.
fuzz:
	@set -e; for pkg in $$($(GO) list ./...); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
	    echo "== $$pkg $$f"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg; \
	  done; \
	done

demo: build
	$(BIN) demo-base --force $(DEMO)
	$(BIN) lock --spec $(DEMO)/spec.yaml --cache out/cache
	$(BIN) build --spec $(DEMO)/spec.yaml --cache out/cache --out $(DEMO)/out

clean:
	rm -rf bin out
