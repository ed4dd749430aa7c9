//go:build !linux

package atomicfile

import "os"

// StartWriteback is a no-op where there is no sync_file_range.
func StartWriteback(*os.File) {}
