//go:build !cgo

package xzdec

import "io"

// newReader is the pure Go decoder, which always checks: ignoreCheck
// only permits skipping.
func newReader(r io.Reader, f Format, limit uint64, _ bool) (io.ReadCloser, error) {
	return newPureReader(r, f, limit), nil
}
