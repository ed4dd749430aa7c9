package hugepage

import "syscall"

func advise(start, n uintptr) {
	syscall.Syscall(syscall.SYS_MADVISE, start, n, 14 /* MADV_HUGEPAGE */)
}
