// Package digest names content the one way the builder writes digests
// down: lower-case hex sha256.
package digest

import (
	"crypto/sha256"
	"encoding/hex"
)

// SHA256Hex is the lower-case hex sha256 of b.
func SHA256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
