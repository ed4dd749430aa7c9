// Package digest names content the one way the builder writes digests
// down: lower-case hex sha256.
package digest

import (
	"crypto/sha256"
	"encoding/hex"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// SHA256Hex is the lower-case hex sha256 of b.
func SHA256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// OCI is the sha256 of b as an OCI descriptor names it.
func OCI(b []byte) v1.Hash { return v1.Hash{Algorithm: "sha256", Hex: SHA256Hex(b)} }
