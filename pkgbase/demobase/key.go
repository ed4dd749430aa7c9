package demobase

import (
	"bytes"
	_ "embed"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/ProtonMail/go-crypto/openpgp"

	"github.com/nodeforge/builder/pkgbase/keyring"
)

// demoKey is the demo base's signing key (RSA 2048, no passphrase).
//
// DEMO ONLY, PUBLIC BY DESIGN: the secret key is committed so that every run
// writes byte-identical signatures. It signs nothing but the demo base; never
// trust it for anything else. genkey.go made it once.
//
//go:embed demo-key.asc
var demoKey []byte

// Key returns the demo signing key, secret part included.
func Key() (*openpgp.Entity, error) {
	el, err := openpgp.ReadArmoredKeyRing(bytes.NewReader(demoKey))
	if err != nil {
		return nil, fmt.Errorf("demo key: %w", err)
	}
	if len(el) != 1 || el[0].PrivateKey == nil {
		return nil, fmt.Errorf("demo key: want one secret key, got %d entities", len(el))
	}
	return el[0], nil
}

// Fingerprint is the upper-case hex fingerprint of the demo key.
func Fingerprint() (string, error) {
	e, err := Key()
	if err != nil {
		return "", err
	}
	return strings.ToUpper(hex.EncodeToString(e.PrimaryKey.Fingerprint)), nil
}

func armoredPublic(e *openpgp.Entity) ([]byte, error) {
	b, err := keyring.ArmoredPublic(e)
	if err != nil {
		return nil, fmt.Errorf("demo key: %w", err)
	}
	return b, nil
}
