// Package testsign is what is left of the signers for tests that moved
// beside attest/signing (signingtest): the factory's tests still import
// it, and internal/layering lets this one arrow run up until they move.
package testsign

import (
	"testing"

	"github.com/nodeforge/builder/attest/signing"
	"github.com/nodeforge/builder/attest/signing/signingtest"
)

// Signer is a fresh cosign key pair's signer.
//
// Deprecated: use signingtest.Signer.
func Signer(t testing.TB) *signing.Signer { return signingtest.Signer(t) }
