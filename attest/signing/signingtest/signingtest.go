// Package signingtest makes signers for tests, beside the package it
// helps test (testutil, which packages below attest/signing use, cannot
// import it).
package signingtest

import (
	"testing"

	"github.com/nodeforge/builder/attest/signing"
)

// Signer is a fresh cosign key pair's signer.
func Signer(t testing.TB) *signing.Signer {
	t.Helper()
	priv, _, err := signing.Generate([]byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	sv, err := signing.LoadPrivate(priv, []byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := signing.NewSigner(sv)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
