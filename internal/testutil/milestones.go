package testutil

import (
	"fmt"
	"strings"
)

// milestones are the console lines that mark how far a boot got: the
// firmware starting the boot manager (OVMF's and AAVMF's BdsDxe), the
// kernel's first line, the kernel starting the init, each step of the
// node init (and the container's output) and the OK marker.
var milestones = []string{"BdsDxe: starting", "Linux version", "Run /init as init process", "nodeforge-init: [",
	"nodeforge-init: container printed", "NODEFORGE-BOOT-OK"}

// Milestones lists the boot's milestone lines with when each reached the
// console (seconds from qemu's start) and the time since the one before,
// then qemu's end: what each step of a boot costs.
func (r *BootResult) Milestones() []string {
	var out []string
	var prev float64
	for i, l := range r.Lines {
		j := -1
		for _, m := range milestones {
			if k := strings.Index(l, m); k >= 0 && (j < 0 || k < j) {
				j = k
			}
		}
		if j < 0 || i >= len(r.At) {
			continue
		}
		at := r.At[i].Seconds()
		text := l[j:]
		if len(text) > 100 {
			text = text[:100] + "..."
		}
		out = append(out, fmt.Sprintf("%7.2f %+7.2f  %s", at, at-prev, text))
		prev = at
	}
	end := r.Total.Seconds()
	return append(out, fmt.Sprintf("%7.2f %+7.2f  qemu exited", end, end-prev))
}
