package compose

import (
	"os"

	"golang.org/x/sys/unix"
)

// startWriteback starts writing a file's dirty pages to disk and returns
// at once: a file that is likely to be made durable soon (the ISO, which
// the factory's cache links and syncs) then reaches the disk while the
// CPU hashes it, and the sync waits for less. A refusal changes nothing.
func startWriteback(f *os.File) {
	unix.SyncFileRange(int(f.Fd()), 0, 0, unix.SYNC_FILE_RANGE_WRITE)
}
