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

.PHONY: help build test test-quick lint bench fuzz demo init demo-boot rpm clean

help:
	@echo "build  - build $(BIN)"
	@echo "test   - vet, then every package but cmd/builder under the race detector, and beside it, without it, cmd/builder and the end-to-end tests that skip under -race (testutil.NoRace): CI runs this"
	@echo "test-quick - the edit-test loop (under 5 minutes on 2 cores): every package with -short, no race detector; the slow tests (qemu boots, two-architecture releases, kills and resumes, load) skip, and so do judges whose tool is not installed"
	@echo "lint   - gofmt check and go vet"
	@echo "bench  - run the Go benchmarks (not part of CI)"
	@echo "fuzz   - run each fuzz target for FUZZTIME (default 10m)"
	@echo "demo   - write the demo package base to $(DEMO) (bootable: Debian's kernel and systemd-boot, and containerd, runc, CNI plugins and btrfs-progs for the cri and btrfs extensions, fetched once into DEMO_CACHE, and the node init; stand-ins where nothing can be fetched), then lock, build, sign and publish its release into a local OCI layout, verify it and write its audit report"
	@echo "demo-boot - boot the demo's ISO (or ISO=FILE, or the one for SCHEMATIC=FILE: $(DEMO_SCHEMATIC) asks for cri and btrfs, which run a container and mount btrfs) under qemu with OVMF, the node's console on this terminal"
	@echo "init   - build the node init, static, to $(INIT)"
	@echo "rpm    - package $(BIN) as nodeforge-builder, a signed RPM a package base can carry, into $(RPM_OUT) (RPM_KEY=FILE: the packager's armored OpenPGP private key; dated by the commit)"

build:
	@echo "building $(BIN): minutes on a cold Go cache (module downloads, libzstd through cgo), seconds afterwards"
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/builder

# The longest packages first: go test starts packages in the order given,
# two at a time on two cores, so the slowest run beside the others instead
# of after most of them.
SLOWEST := ./cmd/builder ./builder/rootfs/sqfs ./pkgbase/resolve ./factory/server ./builder/kernel ./internal/xzdec ./builder
INTEGRATION := github.com/nodeforge/builder/cmd/builder

# Three go test processes side by side. One runs every package but
# cmd/builder under the race detector (their own concurrency tests: the
# factory's concurrent clients, the build's parallel steps). The others
# run without it what is end to end: cmd/builder's integration tests, and
# the long tests that call testutil.NoRace (real bases released and
# booted, whole pipelines), which skip under -race, one package at a time
# (scripts/norace-tests.sh names them). The race detector multiplies such
# tests' time by 3 to 10 and finds nothing their own concurrency tests do
# not.
NORACE := $(shell git grep -lw 'testutil[.]NoRace' -- '*_test.go' | xargs -r -n1 dirname | sort -u | sed 's|^|./|')
# The top-level tests that call it: only those run again without the
# detector (one package at a time, as beside cmd/builder before).
NORACE_TESTS := $(shell scripts/norace-tests.sh)
test: lint
	@set -e; \
	$(GO) test -count=1 -timeout 45m ./cmd/builder & integ=$$!; \
	$(GO) test -p 1 -count=1 -timeout 45m -run '^($(NORACE_TESTS))$$' $(NORACE) & norace=$$!; \
	$(GO) test -race -count=1 -timeout 45m $$($(GO) list $(SLOWEST) ./... | grep -vx '$(INTEGRATION)') & libs=$$!; \
	rc=0; wait $$integ || rc=1; wait $$norace || rc=1; wait $$libs || rc=1; exit $$rc

# -short skips what testutil.Slow marks; CI is unset so that a judge whose
# tool is not installed skips instead of failing.
test-quick:
	CI= $(GO) test -short -count=1 -timeout 10m $(SLOWEST) ./...

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

# The demo's dev key is encrypted with DEMO_PASSWORD (a demo, not a secret).
DEMO_PASSWORD ?= demo

# The bootable demo's inputs: Debian's kernel and systemd-boot-efi, and the
# packages of the cri and btrfs extensions (containerd, runc, CNI plugins,
# btrfs-progs, their libraries), fetched once into DEMO_CACHE (by
# DEMO_FETCH; DEMO_FETCH=false stays offline), and the node init. Where they cannot be had, the demo's media are stand-ins,
# which make demo says at its start and its end. The base is written anew
# each time (the init is rebuilt from the tree), so the release locks it
# again: the same base gives the same lock.
DEMO_CACHE ?= $(or $(NODEFORGE_CACHE_DIR),$(shell [ -w /var/cache/nodeforge ] || [ -w /var/cache ] && echo /var/cache/nodeforge || echo out/debs))
DEMO_FETCH ?= scripts/fetch-test-kernel.sh --demo
INIT    ?= bin/nodeforge-init
# A schematic with the cri and btrfs extensions, for make demo-boot.
DEMO_SCHEMATIC ?= examples/schematic-cri-btrfs.yaml

# The builder as a signed RPM (builder rpm), dated by the commit so that
# two runs on one commit write the same package.
RPM_KEY     ?=
RPM_OUT     ?= dist
RPM_VERSION ?= 0.$(shell git log -1 --format=%cd --date=format:%Y%m%d 2>/dev/null || echo 0)
RPM_RELEASE ?= alt1.git$(shell git rev-parse --short HEAD 2>/dev/null || echo 0)
rpm: build
	@test -n "$(RPM_KEY)" || { echo "make rpm needs RPM_KEY=FILE: the packager's armored OpenPGP private key (gpg --export-secret-keys --armor ID > packager.asc)"; exit 2; }
	SOURCE_DATE_EPOCH=$$(git log -1 --format=%ct) $(BIN) rpm --key $(RPM_KEY) --version $(RPM_VERSION) --release $(RPM_RELEASE) --doc README.md --out $(RPM_OUT)

init:
	CGO_ENABLED=0 GOOS=linux GOARCH=amd64 $(GO) build -trimpath -buildvcs=false -ldflags '-s -w' -o $(INIT) ./cmd/nodeforge-init

demo: build init
	@mkdir -p $(DEMO)
	@$(DEMO_FETCH) "$(DEMO_CACHE)" >$(DEMO)/fetch.log 2>&1 || true; \
	if ls "$(DEMO_CACHE)"/linux-image-6.1.0-*-amd64_*.deb "$(DEMO_CACHE)"/systemd-boot-efi_*_amd64.deb >/dev/null 2>&1; then \
	  note="make demo: bootable media: Debian's kernel and systemd-boot from $(DEMO_CACHE) and the node init $(INIT) (make demo-boot boots them)"; \
	else \
	  note="make demo: STAND-IN media, nothing boots: no Debian kernel and systemd-boot-efi could be fetched into $(DEMO_CACHE) (see $(DEMO)/fetch.log)"; \
	fi; \
	echo "$$note" | tee $(DEMO)/media.txt
	@if grep -q '^make demo: bootable' $(DEMO)/media.txt; then \
	  echo "$(BIN) demo-base --force --kernel-cache $(DEMO_CACHE) --init $(INIT) $(DEMO)"; \
	  out=$$($(BIN) demo-base --force --kernel-cache "$(DEMO_CACHE)" --init $(INIT) $(DEMO)) || exit 1; echo "$$out"; \
	  case "$$out" in \
	  *"cri and btrfs: Debian's"*) ext="cri and btrfs: Debian's containerd, runc, CNI plugins and btrfs-progs (make demo-boot SCHEMATIC=$(DEMO_SCHEMATIC) runs a container and mounts btrfs)" ;; \
	  *) ext="cri and btrfs: stand-ins, nothing of them runs: not every Debian package of theirs could be fetched into $(DEMO_CACHE)/extension-debs (see $(DEMO)/fetch.log)" ;; \
	  esac; \
	  note=$$(cat $(DEMO)/media.txt); echo "$$note; $$ext" >$(DEMO)/media.txt; \
	else \
	  echo "$(BIN) demo-base --force $(DEMO)"; $(BIN) demo-base --force $(DEMO); \
	fi
	@test -f $(DEMO)/keys/dev/cosign.key || COSIGN_PASSWORD=$(DEMO_PASSWORD) $(BIN) keys generate --out $(DEMO)/keys/dev
	COSIGN_PASSWORD=$(DEMO_PASSWORD) $(BIN) release --branch p11 --spec $(DEMO)/spec.yaml --cache out/cache --relock
	$(BIN) verify --key $(DEMO)/keys/dev/cosign.pub --version 1.11.0-demo oci:$(DEMO)/release/dev
	$(BIN) audit --key $(DEMO)/keys/dev/cosign.pub --version 1.11.0-demo -o $(DEMO)/audit $(DEMO)/release/dev
	@cat $(DEMO)/media.txt

# ISO=FILE boots that ISO (one the factory served, say); SCHEMATIC=FILE
# makes the demo release's ISO for that schematic first (what the factory
# serves for it); neither: the demo release's ISO for an empty schematic.
ISO       ?=
SCHEMATIC ?=
demo-boot:
	@BIN=$(BIN) scripts/demo-boot.sh "$(DEMO)" "$(ISO)" "$(SCHEMATIC)"

clean:
	rm -rf bin out
