//go:build !linux

package hugepage

// advise is a no-op where there are no transparent huge pages.
func advise(uintptr, uintptr) {}
