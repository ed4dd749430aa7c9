package certification

import (
	"fmt"
	"strings"
	"testing"
)

// TestRelocated: the audit counts the extensions' relocated files and
// fails a report whose relocated file names no package or lies outside an
// extension.
func TestRelocated(t *testing.T) {
	r := &Report{Files: Files{List: []File{
		{Artifact: "extension/cri/x86_64", Path: "/usr/local/bin/containerd", Package: "containerd-1.6.20-1.x86_64", RelocatedFrom: "/usr/bin/containerd"},
		{Artifact: "extension/cri/x86_64", Path: "/etc/cri/conf.d/20-nodeforge-cri.part", Generator: "extension-file"},
		{Artifact: "rootfs/x86_64", Path: "/usr/bin/ctr", Package: "containerd-1.6.20-1.x86_64"},
	}}}
	var reasons []string
	fail := func(f string, a ...any) { reasons = append(reasons, f) }
	relocated(r, fail)
	if r.Files.Relocated != 1 || len(reasons) != 0 {
		t.Errorf("relocated %d, reasons %v", r.Files.Relocated, reasons)
	}
	r.Files.Relocated = 0
	r.Files.List = append(r.Files.List,
		File{Artifact: "extension/btrfs/x86_64", Path: "/usr/local/sbin/mkfs.btrfs", Generator: "extension-file", RelocatedFrom: "/sbin/mkfs.btrfs"},
		File{Artifact: "rootfs/x86_64", Path: "/usr/local/bin/x", Package: "x-1-1.x86_64", RelocatedFrom: "/usr/bin/x"})
	reasons = nil
	fail = func(f string, a ...any) { reasons = append(reasons, strings.TrimSpace(fmt.Sprintf(f, a...))) }
	relocated(r, fail)
	if r.Files.Relocated != 3 || len(reasons) != 1 || !strings.Contains(reasons[0], "extension/btrfs/x86_64:/usr/local/sbin/mkfs.btrfs (from /sbin/mkfs.btrfs)") ||
		!strings.Contains(reasons[0], "rootfs/x86_64:/usr/local/bin/x (from /usr/bin/x)") {
		t.Errorf("relocated %d, reasons %v", r.Files.Relocated, reasons)
	}
}
