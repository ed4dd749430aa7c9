//go:build !cgo

package xzdec

// haveCgo: NewReader is liblzma's decoder, not the pure Go one.
const haveCgo = false
