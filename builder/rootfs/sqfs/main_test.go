package sqfs

import (
	"os"
	"testing"
)

// TestMain removes the generated tree the size comparison wrote.
func TestMain(m *testing.M) {
	code := m.Run()
	if treeDir != "" && os.Getenv("SQFS_TREE") == "" {
		os.RemoveAll(treeDir)
	}
	os.Exit(code)
}
