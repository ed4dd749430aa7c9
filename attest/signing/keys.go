// Package signing signs and attests what is in an OCI store, in cosign's
// formats: signatures under the sha256-<hex>.sig tag, in-toto statements
// in DSSE envelopes under the .att tag and as OCI referrers; and reads
// them back for verifiers. Its key pairs are cosign's own formats: the
// private key encrypted (scrypt and secretbox, "ENCRYPTED SIGSTORE
// PRIVATE KEY") with a password, the public key as PEM. Signatures made
// with them need no transparency log, Fulcio or TUF root: air-gapped
// sites verify offline with the public key.
package signing

import (
	"crypto"
	"fmt"

	"github.com/sigstore/cosign/v2/pkg/cosign"
	"github.com/sigstore/sigstore/pkg/signature"
)

// Generate makes a new ECDSA P-256 key pair, as cosign generate-key-pair
// does, and returns cosign.key (encrypted with password) and cosign.pub.
func Generate(password []byte) (privatePEM, publicPEM []byte, err error) {
	keys, err := cosign.GenerateKeyPair(func(bool) ([]byte, error) { return password, nil })
	if err != nil {
		return nil, nil, fmt.Errorf("generating a key pair: %w", err)
	}
	return keys.PrivateBytes, keys.PublicBytes, nil
}

// LoadPrivate decrypts a cosign.key.
func LoadPrivate(privatePEM, password []byte) (signature.SignerVerifier, error) {
	sv, err := cosign.LoadPrivateKey(privatePEM, password, nil)
	if err != nil {
		return nil, fmt.Errorf("loading the private key (wrong password, or not a cosign key?): %w", err)
	}
	return sv, nil
}

// LoadPublic reads a cosign.pub.
func LoadPublic(publicPEM []byte) (signature.Verifier, error) {
	pk, err := cosign.PemToECDSAKey(publicPEM)
	if err != nil {
		return nil, fmt.Errorf("reading the public key: %w", err)
	}
	return signature.LoadVerifier(pk, crypto.SHA256)
}
