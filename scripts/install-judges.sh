#!/usr/bin/env bash
# Installs the stock cosign and crane CLIs the release tests use as
# independent judges, the OCI distribution-spec conformance suite the
# factory's registry front is held to, and helm, which lints and renders
# the factory's chart (deploy/helm), built from the Go module proxy at
# pinned versions, into GOBIN (default /usr/local/bin). Skips a tool
# already at its version.
set -euo pipefail
GOBIN="${GOBIN:-/usr/local/bin}"
export GOBIN
COSIGN_VERSION=v2.6.5
CRANE_VERSION=v0.22.1
CONFORMANCE_VERSION=v0.0.0-20260831232431-97274622c111
HELM_VERSION=v4.3.2

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
if ! have helm "$HELM_VERSION"; then
  echo "building helm $HELM_VERSION (about 7 minutes cold on 2 cores)"
  go install "helm.sh/helm/v4/cmd/helm@$HELM_VERSION"
fi
if ! { [ -x "$GOBIN/oci-conformance" ] && go version -m "$GOBIN/oci-conformance" | grep -q "$CONFORMANCE_VERSION"; }; then
  # A main package of a module without a release: built in a scratch
  # module that requires it at the pinned pseudo-version.
  echo "building the OCI conformance suite $CONFORMANCE_VERSION"
  scratch=$(mktemp -d)
  trap 'rm -rf "$scratch"' EXIT
  (cd "$scratch" && go mod init nodeforge.local/conformance >/dev/null 2>&1 &&
    go get "github.com/opencontainers/distribution-spec/conformance@$CONFORMANCE_VERSION" &&
    go build -o "$GOBIN/oci-conformance" github.com/opencontainers/distribution-spec/conformance)
fi
"$GOBIN/cosign" version 2>/dev/null | grep GitVersion || true
"$GOBIN/crane" version
"$GOBIN/helm" version --short
