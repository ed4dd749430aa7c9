//go:build !cgo

package pkcs11key

import "fmt"

// Open refuses: PKCS#11 modules are shared libraries, which a builder
// built without cgo cannot load.
func Open(uri, pin string) (Key, error) {
	if _, err := parse(uri, pin); err != nil {
		return nil, fmt.Errorf("%s: %w", describe(uri), err)
	}
	return nil, fmt.Errorf("%s: this builder was built without cgo and cannot load PKCS#11 modules", describe(uri))
}
