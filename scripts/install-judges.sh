#!/usr/bin/env bash
# Installs the stock cosign and crane CLIs the release tests use as
# independent judges, built from the Go module proxy at pinned versions,
# into GOBIN (default /usr/local/bin). Skips a tool already at its version.
set -euo pipefail
GOBIN="${GOBIN:-/usr/local/bin}"
export GOBIN
COSIGN_VERSION=v2.6.5
CRANE_VERSION=v0.22.1

have() { # have TOOL VERSION: the installed binary reports VERSION
  [ -x "$GOBIN/$1" ] && go version -m "$GOBIN/$1" 2>/dev/null | grep -q "mod.*$2"
}
if ! have crane "$CRANE_VERSION"; then
  echo "building crane $CRANE_VERSION"
  go install "github.com/google/go-containerregistry/cmd/crane@$CRANE_VERSION"
fi
if ! have cosign "$COSIGN_VERSION"; then
  echo "building cosign $COSIGN_VERSION (slow the first time)"
  go install "github.com/sigstore/cosign/v2/cmd/cosign@$COSIGN_VERSION"
fi
"$GOBIN/cosign" version 2>/dev/null | grep GitVersion || true
"$GOBIN/crane" version
