//go:build !linux

package repo

import "unsafe"

// hugePages is a no-op where there are no transparent huge pages.
func hugePages(unsafe.Pointer, uintptr) {}
