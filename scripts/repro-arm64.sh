#!/usr/bin/env bash
# Issue 38, acceptance (c): the same bytes from an arm64 builder. Cross-
# compiles the builder for linux/arm64 with cgo (Debian's aarch64 cross
# compiler and libc: gcc-aarch64-linux-gnu, libc6-dev-arm64-cross), runs it
# under qemu-user (binfmt_misc, or qemu-aarch64-static by name) and checks
# with builder repro --builder that
#   - its build of the x86_64 demo equals the amd64 builder's, and
#   - the amd64 builder's build of the aarch64 test release (Debian's arm64
#     kernel, scripts/fetch-test-kernel.sh) equals its.
# Each comparison also varies TZ, locale, umask, GOMAXPROCS, working
# directory, HOME and package order (builder repro).
#
#   scripts/repro-arm64.sh [WORKDIR]   (kept when given: its aarch64 base is reused)
#
# Both builders are built by make build, with one VERSION (the builder's
# version is in the report and the SBOMs: builders of two versions write
# two reports). Exits non-zero, naming the first differing file, when any
# byte differs.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"
if [ -n "${1:-}" ]; then
  work=$1
  mkdir -p "$work"
else
  work=$(mktemp -d /tmp/nodeforge-repro-arm64.XXXXXX)
  trap 'rm -rf "$work"' EXIT
fi
work=$(cd "$work" && pwd)
cache="$work/cache"
start=$(date +%s)
version=$(git describe --always --dirty 2>/dev/null || echo dev)

echo "== the amd64 builder, and the arm64 one (cgo, cross-compiled)"
B="$work/builder-amd64" arm64="$work/builder-arm64"
make -s build BIN="$B" VERSION="$version" >/dev/null
CGO_ENABLED=1 GOOS=linux GOARCH=arm64 CC=aarch64-linux-gnu-gcc make -s build BIN="$arm64" VERSION="$version" >/dev/null
echo "built in $(($(date +%s) - start)) s"

echo "== x86_64 demo: amd64 builder vs arm64 builder"
rm -rf "$work/demo"
"$B" demo-base "$work/demo" >/dev/null
"$B" lock -q --spec "$work/demo/spec.yaml" --cache "$cache"
t0=$(date +%s)
"$B" repro --builder "$arm64" --spec "$work/demo/spec.yaml" --cache "$cache"
echo "x86_64 demo compared in $(($(date +%s) - t0)) s"

echo "== aarch64 test release: amd64 builder vs arm64 builder"
[ -s "$work/base-aarch64/spec.yaml" ] || go run ./pkgbase/testbase/mkbase -dir "$work/base-aarch64" -arch aarch64 >/dev/null
"$B" lock -q --spec "$work/base-aarch64/spec.yaml" --cache "$cache"
t0=$(date +%s)
"$B" repro --builder "$arm64" --spec "$work/base-aarch64/spec.yaml" --cache "$cache"
echo "aarch64 release compared in $(($(date +%s) - t0)) s"
echo "repro-arm64: identical on both architectures in $(($(date +%s) - start)) s"
