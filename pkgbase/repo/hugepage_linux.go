package repo

import (
	"syscall"
	"unsafe"
)

// hugePages asks the kernel to back the whole 2 MiB pages inside
// [p, p+n) with transparent huge pages when first touched (where THP is
// enabled "madvise"). For large slabs that are filled right after they
// are allocated: faulting in fresh memory 4 KiB at a time is what a large
// decode costs most on VMs. A refusal changes nothing.
func hugePages(p unsafe.Pointer, n uintptr) {
	const huge = 2 << 20
	start := (uintptr(p) + huge - 1) &^ (huge - 1)
	end := (uintptr(p) + n) &^ (huge - 1)
	if end <= start {
		return
	}
	syscall.Syscall(syscall.SYS_MADVISE, start, end-start, 14 /* MADV_HUGEPAGE */)
}
