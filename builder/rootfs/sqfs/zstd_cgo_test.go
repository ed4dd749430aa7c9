//go:build cgo

package sqfs

// zstdSizeLimit is the most our zstd images may exceed mksquashfs's (tests).
const zstdSizeLimit = 1.05
