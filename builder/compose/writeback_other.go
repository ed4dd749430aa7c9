//go:build !linux

package compose

import "os"

// startWriteback is a no-op where there is no sync_file_range.
func startWriteback(*os.File) {}
