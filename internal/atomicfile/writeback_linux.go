package atomicfile

import (
	"os"

	"golang.org/x/sys/unix"
)

// StartWriteback starts writing a file's dirty pages to disk and returns
// at once: a large file that is made durable later (linked into an OCI
// layout, which syncs what it links) then reaches the disk while the CPU
// does other work, and the sync waits for little. A refusal changes
// nothing.
func StartWriteback(f *os.File) {
	unix.SyncFileRange(int(f.Fd()), 0, 0, unix.SYNC_FILE_RANGE_WRITE)
}
