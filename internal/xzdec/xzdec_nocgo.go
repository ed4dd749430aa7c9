//go:build !cgo

package xzdec

import "io"

func newReader(r io.Reader, f Format, limit uint64) (io.ReadCloser, error) {
	return newPureReader(r, f, limit), nil
}

// The pure Go decoder always checks.
func newUncheckedReader(r io.Reader, f Format, limit uint64) (io.ReadCloser, error) {
	return newPureReader(r, f, limit), nil
}
